// HTTP Basic (RFC 7617): `Authorization: Basic base64(user:password)` where the password half
// (API keys used as passwords) or the user half (tokens used as user names) is the dummy.
#include "brokers/families.hpp"

namespace broker::brokers {
namespace {

class basic_broker final : public value_broker {
 public:
  using value_broker::value_broker;

  std::unique_ptr<value_broker> with_dummy(std::string dummy) const override {
    return std::make_unique<basic_broker>(*this, std::move(dummy));
  }

  int swap_header(std::string_view name, std::string& value) const override {
    if (!is_authorization(name)) return 0;
    auto auth = parse_auth_value(value);
    if (!auth) return 0;
    return swap_basic(value, *auth, dummy(), real(), true, true);
  }
};

}  // namespace

std::unique_ptr<value_broker> make_basic_broker(value_broker::init values) {
  return std::make_unique<basic_broker>(std::move(values));
}

}  // namespace broker::brokers
