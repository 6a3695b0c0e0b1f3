#include "capture/dns_message.hpp"

#include <algorithm>

#include "base/text.hpp"

namespace broker::capture::dns {

namespace {

constexpr std::size_t header_size = 12;
constexpr std::size_t max_name_octets = 255;  // on the wire, length octets and the root's 0 counted
constexpr std::size_t max_label_octets = 63;
// A compressor writes one pointer per name; a name can have at most 127 labels, so more pointers
// than that can only be built to make the reader work.
constexpr int max_pointer_hops = 127;
constexpr std::size_t min_udp_message = 512;
constexpr std::uint16_t question_pointer = 0xC00C;  // the question name, right after the header
// An answer's bytes besides its RDATA: owner pointer, TYPE, CLASS, TTL, RDLENGTH.
constexpr std::size_t record_fixed_size = 2 + 2 + 2 + 4 + 2;

// Header flag bits (RFC 1035 §4.1.1, CD from RFC 4035 §3.2.2).
constexpr std::uint16_t flag_qr = 0x8000, flag_aa = 0x0400, flag_tc = 0x0200, flag_rd = 0x0100,
                        flag_ra = 0x0080, flag_cd = 0x0010;

std::uint16_t get16(std::string_view wire, std::size_t at) {
  return static_cast<std::uint16_t>(static_cast<std::uint8_t>(wire[at]) << 8 |
                                    static_cast<std::uint8_t>(wire[at + 1]));
}

std::uint32_t get32(std::string_view wire, std::size_t at) {
  return std::uint32_t{get16(wire, at)} << 16 | get16(wire, at + 2);
}

void put16(std::string& out, std::uint16_t v) {
  out += static_cast<char>(v >> 8);
  out += static_cast<char>(v & 0xFF);
}

void put32(std::string& out, std::uint32_t v) {
  put16(out, static_cast<std::uint16_t>(v >> 16));
  put16(out, static_cast<std::uint16_t>(v & 0xFFFF));
}

bool plain(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

unsigned char fold(unsigned char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<unsigned char>(c - 'A' + 'a') : c;
}

void append_label(std::string& out, std::string_view label) {
  for (char raw : label) {
    const unsigned char c = fold(static_cast<unsigned char>(raw));
    if (plain(c)) {
      out += static_cast<char>(c);
    } else {
      out += '\\';
      out += static_cast<char>('0' + c / 100);
      out += static_cast<char>('0' + c / 10 % 10);
      out += static_cast<char>('0' + c % 10);
    }
  }
}

struct name_read {
  std::string name;
  std::string wire;             // uncompressed, case kept
  std::size_t next = 0;         // where the record goes on after the name
  const char* error = nullptr;  // set when the name is malformed
};

// The name at `at`, in presentation form. Each pointer must point before the start of the labels
// read since the last jump (as BIND's dns_name_fromwire requires), so jumps only go further back.
name_read read_name(std::string_view wire, std::size_t at) {
  name_read r;
  std::size_t pos = at, run_start = at, octets = 1;
  std::optional<std::size_t> next;
  int hops = 0;
  bool first = true;
  const auto fail = [&](const char* why) {
    r.error = why;
    return r;
  };
  for (;;) {
    if (pos >= wire.size()) return fail("a name runs past the end");
    const auto length = static_cast<std::uint8_t>(wire[pos]);
    if ((length & 0xC0) == 0xC0) {
      if (pos + 1 >= wire.size()) return fail("a compression pointer runs past the end");
      const std::size_t target = get16(wire, pos) & 0x3FFF;
      if (target >= run_start) return fail("a compression pointer that does not point back");
      if (++hops > max_pointer_hops) return fail("too many compression pointers");
      if (!next) next = pos + 2;
      pos = run_start = target;
      continue;
    }
    // 0x40 and 0x80 were extended label types, none of them in use (RFC 6891 §5).
    if (length & 0xC0) return fail("an unknown label type");
    if (length == 0) break;
    if (wire.size() - pos - 1 < length) return fail("a label runs past the end");
    octets += 1 + length;
    if (octets > max_name_octets) return fail("a name over 255 octets");
    if (!first) r.name += '.';
    first = false;
    append_label(r.name, wire.substr(pos + 1, length));
    r.wire += wire.substr(pos, 1 + length);
    pos += 1 + length;
  }
  r.wire += '\0';
  r.next = next.value_or(pos + 1);
  return r;
}

// RFC 6891 §6.1.2: the OPT RDATA is a run of {code, length, data} options that fills it exactly.
bool options_well_formed(std::string_view rdata) {
  while (!rdata.empty()) {
    if (rdata.size() < 4) return false;
    const std::size_t length = get16(rdata, 2);
    if (rdata.size() - 4 < length) return false;
    rdata.remove_prefix(4 + length);
  }
  return true;
}

void put_header(std::string& out, std::uint16_t id, std::uint16_t flags, std::uint16_t qdcount,
                std::uint16_t ancount, std::uint16_t arcount) {
  put16(out, id);
  put16(out, flags);
  put16(out, qdcount);
  put16(out, ancount);
  put16(out, 0);  // NSCOUNT: we answer from no zone, so there is no authority to cite
  put16(out, arcount);
}

// The header's 4-bit RCODE, and the upper 8 bits that go into the OPT record's TTL field.
std::uint16_t rcode_low(rcode code) {
  return static_cast<std::uint8_t>(code) & 0x0F;
}
std::uint32_t rcode_high(rcode code) {
  return static_cast<std::uint8_t>(code) >> 4;
}

bool equal_folded(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return fold(static_cast<unsigned char>(x)) == fold(static_cast<unsigned char>(y));
         });
}

bool ends_with_folded(std::string_view text, std::string_view suffix) {
  if (text.size() < suffix.size()) return false;
  text.remove_prefix(text.size() - suffix.size());
  return std::equal(text.begin(), text.end(), suffix.begin(), [](char a, char b) {
    return fold(static_cast<unsigned char>(a)) == static_cast<unsigned char>(b);
  });
}

}  // namespace

std::variant<query, parse_failure> parse_query(std::string_view wire) {
  parse_failure failure;
  const auto fail = [&](std::string reason) -> std::variant<query, parse_failure> {
    failure.reason = std::move(reason);
    return failure;
  };
  if (wire.size() < header_size) return fail("shorter than a DNS header");
  const std::uint16_t flags = get16(wire, 2);
  failure.id = get16(wire, 0);
  failure.opcode = (flags >> 11) & 0x0F;
  failure.header_read = true;
  if (flags & flag_qr) {
    failure.is_response = true;
    return fail("a response, not a query");
  }
  const std::uint16_t qdcount = get16(wire, 4), ancount = get16(wire, 6), nscount = get16(wire, 8),
                      arcount = get16(wire, 10);
  if (qdcount != 1) return fail("QDCOUNT " + std::to_string(qdcount) + ", not 1");
  if (ancount != 0 || nscount != 0) return fail("answer or authority records in a query");
  if (arcount > 1) return fail("ARCOUNT " + std::to_string(arcount) + ", more than an OPT record");

  query q;
  q.id = *failure.id;
  q.opcode = failure.opcode;
  q.recursion_desired = flags & flag_rd;
  q.checking_disabled = flags & flag_cd;
  name_read qname = read_name(wire, header_size);
  if (qname.error) return fail(std::string("the question: ") + qname.error);
  std::size_t at = qname.next;
  if (wire.size() - at < 4) return fail("the question is cut short");
  q.q = {std::move(qname.name), get16(wire, at), get16(wire, at + 2)};
  q.asked_name = std::move(qname.wire);
  at += 4;

  if (arcount == 1) {
    const name_read owner = read_name(wire, at);
    if (owner.error) return fail(std::string("the additional record: ") + owner.error);
    at = owner.next;
    if (wire.size() - at < 10) return fail("the additional record is cut short");
    if (get16(wire, at) != type::opt) return fail("an additional record that is not OPT");
    if (!owner.name.empty()) return fail("an OPT record whose name is not the root");
    const std::uint16_t payload = get16(wire, at + 2);
    const std::uint32_t ttl = get32(wire, at + 4);
    const std::size_t rdlength = get16(wire, at + 8);
    at += 10;
    if (wire.size() - at < rdlength) return fail("the OPT record's data runs past the end");
    if (!options_well_formed(wire.substr(at, rdlength))) return fail("a malformed EDNS option");
    at += rdlength;
    q.edns = true;
    q.udp_payload = std::max<std::uint16_t>(payload, min_udp_message);
    q.edns_version = (ttl >> 16) & 0xFF;
  }
  if (at != wire.size()) return fail("bytes after the message");
  return q;
}

std::string build_response(const query& q, rcode code, const std::vector<record>& answers,
                           std::size_t max_size) {
  max_size = std::clamp(max_size, min_udp_message, max_tcp_message);
  if (!q.edns && static_cast<std::uint8_t>(code) > 0x0F) code = rcode::servfail;
  const std::optional<std::string> qname = encode_name(q.q.name);
  std::uint16_t flags = flag_qr | static_cast<std::uint16_t>((q.opcode & 0x0F) << 11) | flag_aa |
                        flag_ra | rcode_low(code);
  if (q.recursion_desired) flags |= flag_rd;
  if (q.checking_disabled) flags |= flag_cd;

  std::string question;
  if (qname) {
    question = equal_folded(q.asked_name, *qname) ? q.asked_name : *qname;
    put16(question, q.q.qtype);
    put16(question, q.q.qclass);
  }
  std::string opt;
  if (q.edns) {
    opt += '\0';  // the root
    put16(opt, type::opt);
    put16(opt, response_udp_payload);
    put32(opt, rcode_high(code) << 24);  // extended RCODE, version 0, DO clear
    put16(opt, 0);
  }
  std::string answer_section;
  std::size_t answer_count = 0;
  if (qname) {
    const std::size_t room = max_size - header_size - question.size() - opt.size();
    bool fits = true;
    for (const record& r : answers) {
      // Stop at the first record past the limit; one longer than 65535 fits in no message.
      fits = r.rdata.size() <= 0xFFFF &&
             answer_section.size() + record_fixed_size + r.rdata.size() <= room;
      if (!fits) break;
      put16(answer_section, question_pointer);
      put16(answer_section, r.type);
      put16(answer_section, class_in);
      put32(answer_section, r.ttl);
      put16(answer_section, static_cast<std::uint16_t>(r.rdata.size()));
      answer_section += r.rdata;
      ++answer_count;
    }
    if (!fits) {
      answer_section.clear();
      answer_count = 0;
      flags |= flag_tc;
    }
  }

  std::string out;
  out.reserve(header_size + question.size() + answer_section.size() + opt.size());
  put_header(out, q.id, flags, qname ? 1 : 0, static_cast<std::uint16_t>(answer_count),
             q.edns ? 1 : 0);
  out += question;
  out += answer_section;
  out += opt;
  return out;
}

std::string build_header_only(std::uint16_t id, std::uint8_t opcode, rcode code) {
  if (static_cast<std::uint8_t>(code) > 0x0F) code = rcode::servfail;
  std::string out;
  put_header(
      out, id,
      flag_qr | static_cast<std::uint16_t>((opcode & 0x0F) << 11) | flag_ra | rcode_low(code), 0, 0,
      0);
  return out;
}

std::optional<std::string> encode_name(std::string_view name) {
  if (name == "." || name.empty()) return std::string(1, '\0');
  std::string out;
  std::string label;
  const auto end_label = [&] {
    if (label.empty() || label.size() > max_label_octets) return false;
    out += static_cast<char>(label.size());
    out += label;
    label.clear();
    return out.size() + 1 <= max_name_octets;
  };
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (c == '.') {
      if (!end_label()) return std::nullopt;
      continue;
    }
    if (c != '\\') {
      label += c;
      continue;
    }
    if (i + 1 >= name.size()) return std::nullopt;
    const auto digit = [&](std::size_t at) { return name[at] >= '0' && name[at] <= '9'; };
    if (!digit(i + 1)) {
      label += name[++i];
      continue;
    }
    if (name.size() - i < 4 || !digit(i + 2) || !digit(i + 3)) return std::nullopt;
    const int value = (name[i + 1] - '0') * 100 + (name[i + 2] - '0') * 10 + (name[i + 3] - '0');
    if (value > 255) return std::nullopt;
    label += static_cast<char>(value);
    i += 3;
  }
  // A name's last label has no dot after it, unless the name was written absolute.
  if (!label.empty() && !end_label()) return std::nullopt;
  out += '\0';
  return out;
}

std::optional<std::array<std::uint8_t, 16>> reverse_name_address(std::string_view name) {
  std::array<std::uint8_t, 16> address{};
  constexpr std::string_view v4_suffix = ".in-addr.arpa", v6_suffix = ".ip6.arpa";
  if (ends_with_folded(name, v4_suffix)) {
    name.remove_suffix(v4_suffix.size());
    address[10] = address[11] = 0xFF;
    // Four decimal labels, least significant octet first, each without leading zeros.
    for (int octet = 15; octet >= 12; --octet) {
      const std::size_t dot = name.find('.');
      const std::string_view label = name.substr(0, dot);
      if (label.empty() || label.size() > 3 || (label.size() > 1 && label[0] == '0'))
        return std::nullopt;
      int value = 0;
      for (char c : label) {
        if (c < '0' || c > '9') return std::nullopt;
        value = value * 10 + (c - '0');
      }
      if (value > 255) return std::nullopt;
      address[octet] = static_cast<std::uint8_t>(value);
      if ((dot == std::string_view::npos) != (octet == 12)) return std::nullopt;
      name.remove_prefix(dot == std::string_view::npos ? name.size() : dot + 1);
    }
    return address;
  }
  if (ends_with_folded(name, v6_suffix)) {
    name.remove_suffix(v6_suffix.size());
    // 32 one-nibble labels, the lowest nibble of the last byte first.
    if (name.size() != 63) return std::nullopt;
    for (std::size_t i = 0; i < 32; ++i) {
      const int nibble = base::hex_value(static_cast<unsigned char>(name[2 * i]));
      if (nibble < 0 || (i < 31 && name[2 * i + 1] != '.')) return std::nullopt;
      auto& byte = address[15 - i / 2];
      byte = static_cast<std::uint8_t>(i % 2 == 0 ? nibble : byte | nibble << 4);
    }
    return address;
  }
  return std::nullopt;
}

std::string reverse_name(const std::array<std::uint8_t, 16>& address) {
  const bool v4_mapped =
      std::all_of(address.begin(), address.begin() + 10, [](std::uint8_t b) { return b == 0; }) &&
      address[10] == 0xFF && address[11] == 0xFF;
  std::string out;
  if (v4_mapped) {
    for (int i = 15; i >= 12; --i) out += std::to_string(address[i]) + '.';
    return out + "in-addr.arpa";
  }
  constexpr char digits[] = "0123456789abcdef";
  for (int i = 15; i >= 0; --i) {
    out += digits[address[i] & 0x0F];
    out += '.';
    out += digits[address[i] >> 4];
    out += '.';
  }
  return out + "ip6.arpa";
}

std::string type_name(std::uint16_t t) {
  switch (t) {
    case type::a:
      return "A";
    case type::ns:
      return "NS";
    case type::cname:
      return "CNAME";
    case type::soa:
      return "SOA";
    case type::ptr:
      return "PTR";
    case type::mx:
      return "MX";
    case type::txt:
      return "TXT";
    case type::aaaa:
      return "AAAA";
    case type::srv:
      return "SRV";
    case type::opt:
      return "OPT";
    case type::svcb:
      return "SVCB";
    case type::https:
      return "HTTPS";
    case type::any:
      return "ANY";
    default:
      return "TYPE" + std::to_string(t);
  }
}

}  // namespace broker::capture::dns
