#include "config/address.hpp"

#include <algorithm>
#include <cstdio>

#include "base/text.hpp"

namespace broker::config {
namespace {

// Strict dotted quad: four decimal octets, no leading zeros. inet_aton also accepts "0177.1" or
// "0x7f.1" (octal, hex, fewer parts); refusing them here keeps a policy from matching a text
// that some resolver would read as a different address.
std::optional<std::array<std::uint8_t, 4>> parse_v4(std::string_view text) {
  std::array<std::uint8_t, 4> out{};
  std::size_t i = 0;
  for (int part = 0; part < 4; ++part) {
    if (part > 0) {
      if (i >= text.size() || text[i] != '.') return std::nullopt;
      ++i;
    }
    std::size_t start = i;
    unsigned value = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9' && i - start < 3) {
      value = value * 10 + static_cast<unsigned>(text[i] - '0');
      ++i;
    }
    std::size_t len = i - start;
    if (len == 0 || value > 255 || (len > 1 && text[start] == '0')) return std::nullopt;
    out[static_cast<std::size_t>(part)] = static_cast<std::uint8_t>(value);
  }
  if (i != text.size()) return std::nullopt;
  return out;
}

// RFC 4291 §2.2: up to eight 1-4 digit hex groups, one "::" for a run of zero groups, and
// optionally a dotted quad in place of the last two groups.
std::optional<std::array<std::uint8_t, 16>> parse_v6(std::string_view text) {
  std::array<std::uint16_t, 8> groups{};
  int count = 0;
  int gap = -1;  // index in groups where "::" stands
  std::size_t i = 0;
  if (text.substr(0, 2) == "::") {
    gap = 0;
    i = 2;
    if (i == text.size()) return std::array<std::uint8_t, 16>{};
  } else if (!text.empty() && text[0] == ':') {
    return std::nullopt;
  }
  while (i < text.size()) {
    if (count == 8) return std::nullopt;
    // An embedded IPv4 tail: the rest of the text up to the end must be a dotted quad.
    std::size_t end = text.find(':', i);
    std::string_view piece = text.substr(i, end == std::string_view::npos ? end : end - i);
    if (piece.find('.') != std::string_view::npos) {
      if (end != std::string_view::npos || count > 6) return std::nullopt;
      auto v4 = parse_v4(piece);
      if (!v4) return std::nullopt;
      groups[static_cast<std::size_t>(count++)] =
          static_cast<std::uint16_t>((*v4)[0] << 8 | (*v4)[1]);
      groups[static_cast<std::size_t>(count++)] =
          static_cast<std::uint16_t>((*v4)[2] << 8 | (*v4)[3]);
      i = text.size();
      break;
    }
    if (piece.empty() || piece.size() > 4) return std::nullopt;
    unsigned value = 0;
    for (char c : piece) {
      int h = base::hex_value(c);
      if (h < 0) return std::nullopt;
      value = value << 4 | static_cast<unsigned>(h);
    }
    groups[static_cast<std::size_t>(count++)] = static_cast<std::uint16_t>(value);
    if (end == std::string_view::npos) {
      i = text.size();
      break;
    }
    i = end + 1;
    if (i < text.size() && text[i] == ':') {
      if (gap >= 0) return std::nullopt;  // a second "::"
      gap = count;
      ++i;
    } else if (i == text.size()) {
      return std::nullopt;  // a single trailing ':'
    }
  }
  if (gap < 0 && count != 8) return std::nullopt;
  if (gap >= 0 && count > 7) return std::nullopt;  // "::" must stand for at least one group

  std::array<std::uint16_t, 8> full{};
  if (gap < 0) {
    full = groups;
  } else {
    int tail = count - gap;
    for (int k = 0; k < gap; ++k)
      full[static_cast<std::size_t>(k)] = groups[static_cast<std::size_t>(k)];
    for (int k = 0; k < tail; ++k)
      full[static_cast<std::size_t>(8 - tail + k)] = groups[static_cast<std::size_t>(gap + k)];
  }
  std::array<std::uint8_t, 16> out{};
  for (std::size_t k = 0; k < 8; ++k) {
    out[2 * k] = static_cast<std::uint8_t>(full[k] >> 8);
    out[2 * k + 1] = static_cast<std::uint8_t>(full[k] & 0xff);
  }
  return out;
}

}  // namespace

std::optional<ip_address> ip_address::parse(std::string_view text) {
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']') {
    text = text.substr(1, text.size() - 2);
    // Brackets only ever wrap IPv6 (RFC 3986 §3.2.2).
    if (text.find(':') == std::string_view::npos) return std::nullopt;
  }
  ip_address result;
  if (text.find(':') != std::string_view::npos) {
    auto bytes = parse_v6(text);
    if (!bytes) return std::nullopt;
    result.bytes = *bytes;
    result.v4 = false;
    return result;
  }
  auto v4 = parse_v4(text);
  if (!v4) return std::nullopt;
  for (std::size_t k = 0; k < 4; ++k) result.bytes[k] = (*v4)[k];
  result.v4 = true;
  return result;
}

ip_address ip_address::from_v4(std::uint32_t host_order) {
  ip_address result;
  result.v4 = true;
  result.bytes[0] = static_cast<std::uint8_t>(host_order >> 24);
  result.bytes[1] = static_cast<std::uint8_t>(host_order >> 16);
  result.bytes[2] = static_cast<std::uint8_t>(host_order >> 8);
  result.bytes[3] = static_cast<std::uint8_t>(host_order);
  return result;
}

std::uint32_t ip_address::v4_value() const {
  return static_cast<std::uint32_t>(bytes[0]) << 24 | static_cast<std::uint32_t>(bytes[1]) << 16 |
         static_cast<std::uint32_t>(bytes[2]) << 8 | static_cast<std::uint32_t>(bytes[3]);
}

std::string ip_address::to_string() const {
  char buf[64];
  if (v4) {
    std::snprintf(buf, sizeof buf, "%u.%u.%u.%u", bytes[0], bytes[1], bytes[2], bytes[3]);
    return buf;
  }
  std::array<unsigned, 8> groups{};
  for (std::size_t k = 0; k < 8; ++k)
    groups[k] = static_cast<unsigned>(bytes[2 * k] << 8 | bytes[2 * k + 1]);

  // RFC 5952 §5: v4-mapped addresses keep their dotted-quad tail.
  bool mapped = groups[0] == 0 && groups[1] == 0 && groups[2] == 0 && groups[3] == 0 &&
                groups[4] == 0 && groups[5] == 0xffff;
  if (mapped) {
    std::snprintf(buf, sizeof buf, "::ffff:%u.%u.%u.%u", bytes[12], bytes[13], bytes[14],
                  bytes[15]);
    return buf;
  }

  // RFC 5952 §4.2: "::" replaces the longest run of two or more zero groups, the first on a tie.
  int best_start = -1, best_len = 0;
  for (int k = 0; k < 8;) {
    if (groups[static_cast<std::size_t>(k)] != 0) {
      ++k;
      continue;
    }
    int start = k;
    while (k < 8 && groups[static_cast<std::size_t>(k)] == 0) ++k;
    if (k - start > best_len) {
      best_start = start;
      best_len = k - start;
    }
  }
  if (best_len < 2) best_start = -1;

  std::string out;
  for (int k = 0; k < 8; ++k) {
    if (k == best_start) {
      out += "::";
      k += best_len - 1;
      continue;
    }
    if (!out.empty() && out.back() != ':') out += ':';
    std::snprintf(buf, sizeof buf, "%x", groups[static_cast<std::size_t>(k)]);
    out += buf;
  }
  return out;
}

std::optional<ip_address> unwrap_v4_mapped(const ip_address& a) {
  if (a.v4) return std::nullopt;
  for (std::size_t i = 0; i < 10; ++i)
    if (a.bytes[i] != 0) return std::nullopt;
  if (a.bytes[10] != 0xff || a.bytes[11] != 0xff) return std::nullopt;
  ip_address v4;
  v4.v4 = true;
  std::copy(a.bytes.begin() + 12, a.bytes.end(), v4.bytes.begin());
  return v4;
}

}  // namespace broker::config
