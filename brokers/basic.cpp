// HTTP Basic (RFC 7617): `Authorization: Basic base64(user:password)` where the password half
// (API keys used as passwords) or the user half (tokens used as user names) is the dummy.
#include "brokers/families.hpp"

namespace broker::brokers {
namespace {

class basic_broker final : public credential_broker {
 public:
  using credential_broker::credential_broker;

  int swap_header(std::string_view name, std::string& value) const override {
    if (!is_authorization(name)) return 0;
    auto auth = parse_auth_value(value);
    if (!auth) return 0;
    return swap_basic(value, *auth, dummy(), real(), true, true);
  }
};

}  // namespace

std::unique_ptr<credential_broker> make_basic_broker(const config::credential_spec& spec,
                                                     std::string_view dummy,
                                                     std::string_view real) {
  return std::make_unique<basic_broker>(spec, dummy, real);
}

}  // namespace broker::brokers
