// GitHub: the token goes in `Authorization: Bearer X` or `Authorization: token X` (REST and
// GraphQL APIs), or as either half of `Authorization: Basic` (git over HTTPS sends
// `x-access-token:TOKEN`; other tools send `TOKEN:x-oauth-basic` or `TOKEN:`).
#include "base/secret.hpp"
#include "brokers/families.hpp"
#include "http/message.hpp"

namespace broker::brokers {
namespace {

class github_broker final : public value_broker {
 public:
  using value_broker::value_broker;

  std::unique_ptr<value_broker> with_dummy(std::string dummy) const override {
    return std::make_unique<github_broker>(*this, std::move(dummy));
  }

  int swap_header(std::string_view name, std::string& value) const override {
    if (!is_authorization(name)) return 0;
    return swap_github_authorization(value, dummy(), real());
  }
};

}  // namespace

int swap_github_authorization(std::string& value, std::string_view from, std::string_view to) {
  auto auth = parse_auth_value(value);
  if (!auth) return 0;
  if (http::iequals(auth->scheme, "bearer") || http::iequals(auth->scheme, "token")) {
    if (auth->token != from) return 0;
    value.replace(auth->token_at, auth->token.size(), to);
    return 1;
  }
  return swap_basic(value, *auth, from, to, true, true);
}

bool carries_github_token(std::string_view value, std::string_view token) {
  std::string copy(value);
  const bool found = swap_github_authorization(copy, token, token) > 0;
  base::wipe(copy);
  return found;
}

std::unique_ptr<value_broker> make_github_broker(value_broker::init values) {
  return std::make_unique<github_broker>(std::move(values));
}

}  // namespace broker::brokers
