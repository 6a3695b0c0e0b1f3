#include "config/path_pattern.hpp"

#include <vector>

#include "base/text.hpp"
#include "config/address.hpp"

namespace broker::config {
namespace {

constexpr char hex_digits[] = "0123456789ABCDEF";

bool is_unreserved(unsigned char c) {  // RFC 3986 §2.3
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == '~';
}

// RFC 3986 §6.2.2.1-2: decode escapes of unreserved characters (they mean the same thing
// either way) and upper-case the hex of the rest, so one path has one spelling. Reserved
// escapes such as %2F stay encoded: decoding them would change the path's structure.
std::optional<std::string> normalize_percent(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out += in[i];
      continue;
    }
    int byte = base::escaped_byte(in, i);
    if (byte < 0) return std::nullopt;
    if (is_unreserved(static_cast<unsigned char>(byte))) {
      out += static_cast<char>(byte);
    } else {
      out += '%';
      out += hex_digits[byte >> 4];
      out += hex_digits[byte & 0xF];
    }
    i += 2;
  }
  return out;
}

// One round of percent-decoding, as a server that decodes the path (once more) does; a '%'
// that does not start a valid escape stays as it is.
std::string decode_once(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    int byte = base::escaped_byte(in, i);
    if (byte < 0) {
      out += in[i];
      continue;
    }
    out += static_cast<char>(byte);
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

// "//a///b" → "/a/b": nginx (merge_slashes), Apache httpd (MergeSlashes), Tomcat and Go's
// path.Clean serve the merged path, so a rule must see it too.
std::string merge_slashes(std::string_view path) {
  std::string out;
  out.reserve(path.size());
  for (char c : path)
    if (c != '/' || out.empty() || out.back() != '/') out += c;
  return out;
}

// Each segment without its ";parameters" (the path Tomcat and Jetty resolve and serve).
std::string strip_params(std::string_view absolute_path) {
  std::string out;
  for (std::string_view seg : split_segments(absolute_path)) {
    out += '/';
    out += seg.substr(0, seg.find(';'));
  }
  return out;
}

std::string ambiguous(std::string_view what) {
  return std::string(what) + " in the path is ambiguous on a host with path rules";
}

std::string escape_text(std::string_view prefix, int byte) {
  std::string out(prefix);
  out += hex_digits[byte >> 4];
  out += hex_digits[byte & 0xF];
  return out;
}

// The bytes of a segment whose meaning depends on the server. `text` is the segment as sent
// (twice == false) or after one round of decoding (twice == true); an escape in it is what a
// server that decodes (once more) turns into a byte.
std::optional<std::string> ambiguous_bytes(std::string_view text, bool twice) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    // Windows and IIS-style servers (and some frameworks) treat '\' as '/'.
    if (text[i] == '\\' && !twice) return ambiguous("a '\\'");
    int byte = base::escaped_byte(text, i);
    if (byte < 0) continue;
    if (byte == '/')
      return ambiguous(twice ? "a double-encoded '/' (%252F)" : "an encoded '/' (%2F)");
    if (byte == '\\')
      return ambiguous(twice ? "a double-encoded '\\' (%255C)" : "an encoded '\\' (%5C)");
    if (byte < 0x20 || byte == 0x7F)
      return ambiguous(
          escape_text(twice ? "a double-encoded control byte (%25" : "an encoded control byte (%",
                      byte) +
          ")");
    // A third round of decoding is not followed: a '%' encoded twice is refused outright.
    if (twice && byte == '%') return ambiguous("a '%' encoded twice (%2525)");
  }
  return std::nullopt;
}

// "..;x" is ".." to servers that drop ";parameters" before resolving dot segments (Tomcat,
// Jetty) and an ordinary segment to the others. `decoded` is the segment decoded once, so an
// encoded ';' (%3B) counts too (servers that decode before dropping parameters).
std::optional<std::string> dot_with_params(std::string_view decoded) {
  const auto semicolon = decoded.find(';');
  if (semicolon == std::string_view::npos) return std::nullopt;
  const std::string_view name = decoded.substr(0, semicolon);
  if (name == "..") return ambiguous("a '..' segment with ';' parameters ('..;')");
  if (name == ".") return ambiguous("a '.' segment with ';' parameters ('.;')");
  return std::nullopt;
}

// Why one percent-normalized segment means different things to different servers, if it does.
std::optional<std::string> ambiguous_segment(std::string_view segment) {
  if (auto why = ambiguous_bytes(segment, false)) return why;
  const std::string once = decode_once(segment);
  if (auto why = dot_with_params(once)) return why;
  // A server that decodes twice reads %252F as '/', %252E%252E as "..": look at the segment as
  // it would, after the first decoding turned each %25 into '%'.
  if (segment.find("%25") == std::string_view::npos) return std::nullopt;
  if (auto why = ambiguous_bytes(once, true)) return why;
  const std::string twice = decode_once(once);
  if (twice == "." || twice == ".." || dot_with_params(twice))
    return ambiguous("a double-encoded dot segment (%252E)");
  return std::nullopt;
}

// RFC 3986 §5.2.4 alone keeps "/a//../b" as "/a/b" (the ".." removes the empty segment), a
// server that merges slashes first serves "/b"; when the two differ, the path is ambiguous.
bool merge_order_matters(std::string_view absolute_path) {
  return merge_slashes(remove_dot_segments(absolute_path)) !=
         remove_dot_segments(merge_slashes(absolute_path));
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

std::optional<std::string> normalize_path(std::string_view target, path_params params) {
  if (target.empty() || target.front() != '/') return std::nullopt;
  target = target.substr(0, target.find_first_of("?#"));
  auto decoded = normalize_percent(target);
  if (!decoded) return std::nullopt;
  if (params == path_params::strip) *decoded = strip_params(*decoded);
  // Dot segments first, then slashes: the order matters only for paths ambiguous_path reports.
  return merge_slashes(remove_dot_segments(*decoded));
}

std::optional<std::string> ambiguous_path(std::string_view target) {
  if (target.empty() || target.front() != '/') return std::nullopt;
  target = target.substr(0, target.find_first_of("?#"));
  auto decoded = normalize_percent(target);
  if (!decoded) return std::nullopt;
  for (std::string_view segment : split_segments(*decoded))
    if (auto why = ambiguous_segment(segment)) return why;
  if (merge_order_matters(*decoded) ||
      (decoded->find(';') != std::string::npos && merge_order_matters(strip_params(*decoded))))
    return ambiguous("a '..' after an empty segment ('//..')");
  return std::nullopt;
}

std::optional<path_pattern> path_pattern::parse(std::string_view text) {
  if (text.empty() || text.front() != '/') return std::nullopt;
  if (text.find_first_of("?#") != std::string_view::npos) return std::nullopt;
  auto normalized = normalize_percent(text);
  if (!normalized) return std::nullopt;
  // A pattern that could never match a normalized, unambiguous path: say so at load time.
  for (std::string_view seg : split_segments(*normalized))
    if (seg == "." || seg == ".." || ambiguous_segment(seg)) return std::nullopt;
  path_pattern p;
  p.text_ = merge_slashes(*normalized);
  return p;
}

bool path_pattern::matches(std::string_view normalized_path) const {
  return glob_match(text_, normalized_path);
}

}  // namespace broker::config
