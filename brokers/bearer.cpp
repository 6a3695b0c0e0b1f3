// Bearer tokens (RFC 6750 §2.1): `Authorization: Bearer X`, the form of most API keys (OpenAI...).
#include "brokers/families.hpp"
#include "http/message.hpp"

namespace broker::brokers {
namespace {

class bearer_broker final : public value_broker {
 public:
  using value_broker::value_broker;

  std::unique_ptr<value_broker> with_dummy(std::string dummy) const override {
    return std::make_unique<bearer_broker>(*this, std::move(dummy));
  }

  int swap_header(std::string_view name, std::string& value) const override {
    if (!is_authorization(name)) return 0;
    auto auth = parse_auth_value(value);
    if (!auth || !http::iequals(auth->scheme, "bearer") || auth->token != dummy()) return 0;
    value.replace(auth->token_at, auth->token.size(), real());
    return 1;
  }
};

}  // namespace

std::unique_ptr<value_broker> make_bearer_broker(value_broker::init values) {
  return std::make_unique<bearer_broker>(std::move(values));
}

}  // namespace broker::brokers
