// Authorization header values (RFC 9110 §11.4) and Basic credentials (RFC 7617), as the
// credential families read and rewrite them; percent-encoding for query parameters.
#include <cstring>

#include "base/secret.hpp"
#include "brokers/families.hpp"
#include "http/message.hpp"

namespace broker::brokers {
namespace {

bool is_tchar(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
         std::strchr("!#$%&'*+-.^_`|~", c) != nullptr;
}

}  // namespace

std::optional<auth_value> parse_auth_value(std::string_view value) {
  std::size_t i = 0;
  while (i < value.size() && base::is_ows(value[i])) ++i;
  const std::size_t scheme_at = i;
  while (i < value.size() && is_tchar(value[i])) ++i;
  const std::size_t scheme_end = i;
  if (scheme_end == scheme_at || i == value.size() || !base::is_ows(value[i])) return std::nullopt;
  while (i < value.size() && base::is_ows(value[i])) ++i;
  std::size_t end = value.size();
  while (end > i && base::is_ows(value[end - 1])) --end;
  if (end == i) return std::nullopt;
  return auth_value{value.substr(scheme_at, scheme_end - scheme_at), i, value.substr(i, end - i)};
}

bool is_authorization(std::string_view header_name) {
  return http::iequals(header_name, "authorization");
}

int swap_basic(std::string& value, const auth_value& auth, std::string_view from,
               std::string_view to, bool user, bool password) {
  if (!http::iequals(auth.scheme, "basic")) return 0;
  auto decoded = base::base64_decode(auth.token);
  if (!decoded) return 0;
  const std::size_t colon = decoded->find(':');  // RFC 7617 §2: the user-id has no colon
  if (colon == std::string::npos) {
    base::wipe(*decoded);
    return 0;
  }
  std::string_view u = std::string_view(*decoded).substr(0, colon);
  std::string_view p = std::string_view(*decoded).substr(colon + 1);
  const bool swap_user = user && u == from;
  const bool swap_password = password && p == from;
  if (!swap_user && !swap_password) {
    base::wipe(*decoded);
    return 0;
  }
  std::string rebuilt;
  rebuilt.reserve(decoded->size() + 2 * to.size());
  rebuilt.append(swap_user ? to : u).append(1, ':').append(swap_password ? to : p);
  std::string encoded = base::base64_encode(rebuilt);
  const std::size_t token_at = auth.token_at, token_size = auth.token.size();  // views into value
  value.replace(token_at, token_size, encoded);
  base::wipe(encoded);
  base::wipe(rebuilt);
  base::wipe(*decoded);
  return (swap_user ? 1 : 0) + (swap_password ? 1 : 0);
}

std::optional<std::string> decode_basic(std::string_view value) {
  auto auth = parse_auth_value(value);
  if (!auth || !http::iequals(auth->scheme, "basic")) return std::nullopt;
  return base::base64_decode(auth->token);
}

}  // namespace broker::brokers
