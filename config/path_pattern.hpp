// Path rules: "/v1/*" style globs matched against a normalized request path (no query).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace broker::config {

// Whether ";parameters" are part of a path segment (RFC 3986 §3.3: to a generic URI they are)
// or are dropped from each segment before the path is resolved, as Tomcat and Jetty do.
enum class path_params { keep, strip };

// The path part of a request target (query and fragment dropped), with percent-encoded
// unreserved characters decoded and the hex of other escapes upper-cased (RFC 3986 §6.2.2),
// "." / ".." segments removed (RFC 3986 §5.2.4) and runs of '/' merged into one (as nginx,
// Apache httpd, Tomcat and Go's path.Clean do), so that "/v1/../admin", "/%76%31/x" and
// "//admin" are matched as what the upstream will see. Reserved escapes such as %2F stay
// encoded. With path_params::strip, each segment's ";..." is dropped before dot segments are
// resolved ("/a;x/b" → "/a/b"). Case is kept (RFC 3986 §6.2.2.1: only the scheme and host are
// case-insensitive). Returns nullopt when the target is not origin-form ("/...") or holds a
// malformed percent escape.
std::optional<std::string> normalize_path(std::string_view target,
                                          path_params params = path_params::keep);

// Why upstream servers may disagree about which resource the target's path names, as a sentence
// ("an encoded '/' (%2F) in the path is ambiguous on a host with path rules"), or nullopt when
// they agree. Ambiguous: an encoded '/' or '\' (%2F, %5C), a raw '\', an encoded control byte
// (%00-%1F, %7F), a segment whose part before ';' (or %3B) is "." or ".." ("..;", ".;x"), any of
// these double-encoded with %25 ("%252F", "%252E%252E"), a '%' encoded more than twice ("%2525"),
// and a ".." that would remove an empty segment ("/a//../b": "/a/b" by RFC 3986 §5.2.4 alone,
// "/b" to servers that merge slashes first). Only the path counts, not the query. A target that
// normalize_path refuses is not reported here (the policy fails closed on it anyway).
std::optional<std::string> ambiguous_path(std::string_view target);

// '*' matches any run of characters (including '/'); everything else matches itself exactly,
// case-sensitively. Must start with '/'; normalized like a request path. A pattern that could
// never match an admitted request (dot segments, an encoded '/' or '\', a raw '\', an encoded
// control byte) is refused.
class path_pattern {
 public:
  static std::optional<path_pattern> parse(std::string_view text);
  bool matches(std::string_view normalized_path) const;
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

}  // namespace broker::config
