// The one interface the MITM loop knows (STYLE §2): a credential family that puts a session's
// real value where its clients put the dummy. One implementation per family, one file each
// (github.cpp, bearer.cpp, header.cpp, basic.cpp); query parameters are common to all.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "config/policy.hpp"

namespace broker::brokers {

class credential_broker {
 public:
  // `dummy` and `real` must outlive the broker and have the same length.
  credential_broker(const config::credential_spec& spec, std::string_view dummy,
                    std::string_view real)
      : spec_(spec), dummy_(dummy), real_(real) {}
  virtual ~credential_broker() = default;

  // Rewrites one request header value in place where this family carries the credential
  // (`name` as received, compared case-insensitively). Returns how many dummies became real.
  virtual int swap_header(std::string_view name, std::string& value) const = 0;

  // Rewrites the values of the query parameters the credential opted into (spec.query); a
  // parameter whose whole value is the dummy becomes the real value. Returns the count.
  int swap_query(std::string& target) const;

  const config::credential_spec& spec() const { return spec_; }

 protected:
  // Replaces the dummy in `value` when `value` is exactly the dummy; 1 or 0.
  int swap_exact(std::string& value) const;
  std::string_view dummy() const { return dummy_; }
  std::string_view real() const { return real_; }

 private:
  const config::credential_spec& spec_;
  std::string_view dummy_;
  std::string_view real_;
};

// The broker for spec.type; throws std::invalid_argument for a type without one here (the
// cloud families come later).
std::unique_ptr<credential_broker> make_broker(const config::credential_spec& spec,
                                               std::string_view dummy, std::string_view real);

// base64 (RFC 4648 §4, with padding) for Basic credentials. decode returns nullopt on bad input.
std::string base64_encode(std::string_view data);
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace broker::brokers
