#include "config/path_pattern.hpp"

#include <vector>

#include "config/address.hpp"

namespace broker::config {
namespace {

bool is_unreserved(unsigned char c) {  // RFC 3986 §2.3
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == '~';
}

// RFC 3986 §6.2.2.1-2: decode escapes of unreserved characters (they mean the same thing
// either way) and upper-case the hex of the rest, so one path has one spelling. Reserved
// escapes such as %2F stay encoded: decoding them would change the path's structure.
std::optional<std::string> normalize_percent(std::string_view in) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out += in[i];
      continue;
    }
    if (i + 2 >= in.size()) return std::nullopt;
    int hi = hex_value(in[i + 1]), lo = hex_value(in[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    auto byte = static_cast<unsigned char>(hi << 4 | lo);
    if (is_unreserved(byte)) {
      out += static_cast<char>(byte);
    } else {
      out += '%';
      out += hex[hi];
      out += hex[lo];
    }
    i += 2;
  }
  return out;
}

std::vector<std::string_view> split_segments(std::string_view absolute_path) {
  std::vector<std::string_view> segments;
  std::string_view rest = absolute_path.substr(1);
  for (;;) {
    std::size_t slash = rest.find('/');
    segments.push_back(rest.substr(0, slash));
    if (slash == std::string_view::npos) break;
    rest = rest.substr(slash + 1);
  }
  return segments;
}

// RFC 3986 §5.2.4 for an absolute path. Empty segments ("//") are kept, as the RFC does.
std::string remove_dot_segments(std::string_view absolute_path) {
  auto segments = split_segments(absolute_path);
  std::vector<std::string_view> out;
  for (std::size_t i = 0; i < segments.size(); ++i) {
    std::string_view seg = segments[i];
    if (seg == "." || seg == "..") {
      if (seg == ".." && !out.empty()) out.pop_back();
      if (i + 1 == segments.size()) out.push_back("");  // "/a/.." ends in a directory: "/"
      continue;
    }
    out.push_back(seg);
  }
  std::string path;
  for (std::string_view seg : out) {
    path += '/';
    path += seg;
  }
  return path.empty() ? "/" : path;
}

// Iterative glob: on a mismatch, retry from the last '*' consuming one more character.
// Worst case O(pattern * path), no recursion.
bool glob_match(std::string_view pattern, std::string_view text) {
  std::size_t p = 0, t = 0;
  std::size_t star = std::string_view::npos, star_text = 0;
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      star_text = t;
    } else if (p < pattern.size() && pattern[p] == text[t]) {
      ++p;
      ++t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++star_text;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

}  // namespace

std::optional<std::string> normalize_path(std::string_view target) {
  if (target.empty() || target.front() != '/') return std::nullopt;
  target = target.substr(0, target.find_first_of("?#"));
  auto decoded = normalize_percent(target);
  if (!decoded) return std::nullopt;
  return remove_dot_segments(*decoded);
}

std::optional<path_pattern> path_pattern::parse(std::string_view text) {
  if (text.empty() || text.front() != '/') return std::nullopt;
  if (text.find_first_of("?#") != std::string_view::npos) return std::nullopt;
  auto normalized = normalize_percent(text);
  if (!normalized) return std::nullopt;
  // A pattern with dot segments could never match a normalized path; say so at load time.
  for (std::string_view seg : split_segments(*normalized))
    if (seg == "." || seg == "..") return std::nullopt;
  path_pattern p;
  p.text_ = std::move(*normalized);
  return p;
}

bool path_pattern::matches(std::string_view normalized_path) const {
  return glob_match(text_, normalized_path);
}

}  // namespace broker::config
