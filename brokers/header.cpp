// A family's own header (`x-api-key: X`, `api-key: X`, `PRIVATE-TOKEN: X`...), named by the
// credential's "header", with its optional "prefix" (`x-auth: Token X`). Only that header, and
// with "also_bearer" `Authorization: Bearer X` too (an API whose newer clients send the same key
// that way: @anthropic-ai/sdk 1.x); otherwise an `Authorization: Bearer` with the dummy is not
// this family's form and stays as it is.
#include "brokers/families.hpp"
#include "http/message.hpp"

namespace broker::brokers {
namespace {

class header_broker final : public value_broker {
 public:
  using value_broker::value_broker;

  std::unique_ptr<value_broker> with_dummy(std::string dummy) const override {
    return std::make_unique<header_broker>(*this, std::move(dummy));
  }

  int swap_header(std::string_view name, std::string& value) const override {
    if (spec().also_bearer && is_authorization(name)) {
      auto auth = parse_auth_value(value);
      if (!auth || !http::iequals(auth->scheme, "bearer") || auth->token != dummy()) return 0;
      value.replace(auth->token_at, auth->token.size(), real());
      return 1;
    }
    if (!http::iequals(name, spec().header)) return 0;
    // Surrounding whitespace is not part of a field value (RFC 9110 §5.5); the prefix is compared
    // exactly as the policy spells it.
    std::size_t begin = 0, end = value.size();
    while (begin < end && base::is_ows(value[begin])) ++begin;
    while (end > begin && base::is_ows(value[end - 1])) --end;
    std::string_view field = std::string_view(value).substr(begin, end - begin);
    const std::string& prefix = spec().prefix;
    if (!field.starts_with(prefix) || field.substr(prefix.size()) != dummy()) return 0;
    value.replace(begin + prefix.size(), dummy().size(), real());
    return 1;
  }
};

}  // namespace

std::unique_ptr<value_broker> make_header_broker(value_broker::init values) {
  return std::make_unique<header_broker>(std::move(values));
}

}  // namespace broker::brokers
