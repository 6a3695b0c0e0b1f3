// What the static-value families share: exact-token swaps, opted-in query parameters, the
// values they show the child, and the factory that picks a family by the credential's type.
#include "brokers/value_broker.hpp"

#include <algorithm>
#include <stdexcept>

#include "base/text.hpp"
#include "brokers/dummy.hpp"
#include "brokers/families.hpp"

namespace broker::brokers {

value_broker::value_broker(init values)
    : request_broker(std::move(values.spec), std::move(values.other_layers)),
      real_(std::make_shared<const base::secret>(std::move(values.real))),
      dummy_(std::move(values.dummy)) {
  if (real_->empty()) throw std::invalid_argument("credential " + name() + ": empty value");
  if (dummy_.size() != real_->size())
    throw std::invalid_argument("credential " + name() + ": dummy and real differ in length");
}

value_broker::value_broker(const value_broker& base, std::string dummy)
    : request_broker(base.spec(), base.other_layers()),
      real_(base.real_),
      dummy_(std::move(dummy)) {}

std::unique_ptr<request_broker> value_broker::for_session(const dummy_seed& seed) const {
  std::string dummy = seed.dummy(*real_, name(), "value");
  // Responses are scrubbed real → dummy in place: the two must be as long.
  if (dummy.size() != real_->size())
    throw std::invalid_argument("credential " + name() + ": dummy and real differ in length");
  return with_dummy(std::move(dummy));
}

credential_values value_broker::values() const {
  return {{{real_->expose(), dummy_}}, {dummy_}};
}

void value_broker::dummy_variables(std::vector<dummy_variable>& out) const {
  for (const std::string& variable : spec().env) out.push_back({variable, dummy_, name()});
}

int value_broker::swap_exact(std::string& value) const {
  if (value != dummy_) return 0;
  value.assign(real_->expose());
  return 1;
}

int value_broker::swap_query(std::string& target) const {
  if (spec().query.empty()) return 0;
  const std::size_t question = target.find('?');
  if (question == std::string::npos) return 0;
  int swapped = 0;
  std::size_t at = question + 1;
  for (;;) {
    std::size_t end = target.find_first_of("&#", at);
    if (end == std::string::npos) end = target.size();
    std::string_view param = std::string_view(target).substr(at, end - at);
    const std::size_t eq = param.find('=');
    if (eq != std::string_view::npos) {
      std::string name = base::percent_decode(param.substr(0, eq));
      std::string_view value = param.substr(eq + 1);
      if (std::find(spec().query.begin(), spec().query.end(), name) != spec().query.end() &&
          (value == dummy_ || base::percent_decode(value) == dummy_)) {
        std::string encoded = base::percent_encode(real_->expose());
        const std::size_t value_at = at + eq + 1, value_size = value.size();
        target.replace(value_at, value_size, encoded);
        end = value_at + encoded.size();
        base::wipe(encoded);
        ++swapped;
      }
    }
    if (end >= target.size() || target[end] == '#') break;
    at = end + 1;
  }
  return swapped;
}

std::unique_ptr<value_broker> make_value_broker(value_broker::init values) {
  const std::string type = values.spec.type;
  if (type == "github") return make_github_broker(std::move(values));
  if (type == "bearer") return make_bearer_broker(std::move(values));
  if (type == "header") return make_header_broker(std::move(values));
  if (type == "basic") return make_basic_broker(std::move(values));
  throw std::invalid_argument("credential " + values.spec.name + ": type \"" + type +
                              "\" is not a static-value family");
}

}  // namespace broker::brokers
