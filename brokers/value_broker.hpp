// The families whose credential is one static value the child's clients send as they got it
// (github, bearer, header, basic): the real value, its per-session dummy, and where the family
// carries it. One file per family (github.cpp, bearer.cpp, header.cpp, basic.cpp); opted-in
// query parameters are common to all.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "base/secret.hpp"
#include "brokers/request_broker.hpp"

namespace broker::brokers {

class value_broker : public request_broker {
 public:
  struct init {
    config::credential_spec spec;
    base::secret real;
    std::string dummy;  // same length as real
    layer_bindings other_layers;
  };
  // Throws std::invalid_argument for an empty real value or a dummy of another length.
  explicit value_broker(init values);
  // `base`'s credential with `dummy` (another session's: for_session checks it is as long as the
  // real value; or another credential's, standing_in_for).
  value_broker(const value_broker& base, std::string dummy);

  const std::string& dummy() const { return dummy_; }
  // This credential as swapped for `base`'s dummy (a credential with "mcp_tools" standing in
  // for `base` on calls of its tools): only for swapping, its values never catalogued (the dummy
  // need not be as long as this real value).
  std::unique_ptr<value_broker> standing_in_for(const value_broker& base) const {
    return with_dummy(base.dummy_);
  }

  // The dummy is the real value's shape, derived from the seed under the field "value".
  std::unique_ptr<request_broker> for_session(const dummy_seed& seed) const override;
  credential_values values() const override;
  void dummy_variables(std::vector<dummy_variable>& out) const override;
  int swap_query(std::string& target) const override;

 protected:
  // Replaces the dummy in `value` when `value` is exactly the dummy; 1 or 0.
  int swap_exact(std::string& value) const;
  // The real value's bytes, to write them into a request being swapped; never to keep.
  std::string_view real() const { return real_->expose(); }

 private:
  // The family's broker of the same credential with another dummy (each family constructs its
  // own type).
  virtual std::unique_ptr<value_broker> with_dummy(std::string dummy) const = 0;

  std::shared_ptr<const base::secret> real_;  // shared with the other sessions' brokers of it
  std::string dummy_;
};

// The broker for spec.type (github, bearer, header, basic); throws std::invalid_argument for
// another type and as value_broker's constructor does.
std::unique_ptr<value_broker> make_value_broker(value_broker::init values);

}  // namespace broker::brokers
