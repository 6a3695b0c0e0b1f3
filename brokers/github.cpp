// GitHub: the token goes in `Authorization: Bearer X` or `Authorization: token X` (REST and
// GraphQL APIs), or as either half of `Authorization: Basic` (git over HTTPS sends
// `x-access-token:TOKEN`; other tools send `TOKEN:x-oauth-basic` or `TOKEN:`).
#include "brokers/families.hpp"
#include "http/message.hpp"

namespace broker::brokers {
namespace {

class github_broker final : public credential_broker {
 public:
  using credential_broker::credential_broker;

  int swap_header(std::string_view name, std::string& value) const override {
    if (!is_authorization(name)) return 0;
    auto auth = parse_auth_value(value);
    if (!auth) return 0;
    if (http::iequals(auth->scheme, "bearer") || http::iequals(auth->scheme, "token")) {
      if (auth->token != dummy()) return 0;
      value.replace(auth->token_at, auth->token.size(), real());
      return 1;
    }
    return swap_basic(value, *auth, dummy(), real(), true, true);
  }
};

}  // namespace

std::unique_ptr<credential_broker> make_github_broker(const config::credential_spec& spec,
                                                      std::string_view dummy,
                                                      std::string_view real) {
  return std::make_unique<github_broker>(spec, dummy, real);
}

}  // namespace broker::brokers
