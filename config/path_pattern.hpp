// Path rules: "/v1/*" style globs matched against a normalized request path (no query).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace broker::config {

// The path part of a request target (query and fragment dropped), with percent-encoded
// unreserved characters decoded and "." / ".." segments removed (RFC 3986 §5.2.4), so that
// "/v1/../admin" and "/%76%31/x" are matched as what the upstream will see. Returns nullopt when
// the target is not origin-form ("/..." ) or holds a malformed percent escape.
std::optional<std::string> normalize_path(std::string_view target);

// '*' matches any run of characters (including '/'); everything else matches itself exactly.
// Must start with '/'.
class path_pattern {
 public:
  static std::optional<path_pattern> parse(std::string_view text);
  bool matches(std::string_view normalized_path) const;
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

}  // namespace broker::config
