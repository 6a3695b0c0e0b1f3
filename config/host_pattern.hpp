// Host names and host patterns as policy rules and credential bindings use them (docs/policy.md).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace broker::config {

// Lower-cases ASCII, drops one trailing dot, converts non-ASCII (UTF-8) labels to punycode
// ("xn--..."), and checks each label is 1..63 chars of letters, digits, '-' and '_' (total
// <= 253). Returns nullopt for anything that is not a valid host name. IP literals are not host
// names: callers try ip_address::parse first. Also refused: a numeric or 0x-hex last label
// ("127.1", "0x7f.1" - URL parsers read those as IPv4), and invisible or space code points.
// Non-ASCII case folding covers Latin-1/Extended-A, Greek, Cyrillic and fullwidth ASCII only.
std::optional<std::string> normalize_host(std::string_view host);

// "api.github.com" matches exactly that host; "*.example.com" matches any subdomain at any depth
// but not the apex; "*" matches every host name (never an IP literal).
class host_pattern {
 public:
  // nullopt when the pattern is malformed ("*" only as the whole first label, valid host after).
  static std::optional<host_pattern> parse(std::string_view text);

  // `host` must already be normalized (normalize_host).
  bool matches(std::string_view normalized_host) const;
  const std::string& text() const {
    return text_;
  }  // normalized form, e.g. "*.xn--bcher-kva.example"

 private:
  std::string text_;
  std::string suffix_;  // ".example.com" for a wildcard, empty otherwise
  bool any_ = false;
};

}  // namespace broker::config
