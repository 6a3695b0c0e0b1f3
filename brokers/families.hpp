// Internal to brokers/: the family constructors make_value_broker() chooses from, and the
// request-text helpers (Authorization values, Basic credentials, percent-encoding) that the
// families and credential_set share. The proxy includes credential_set.hpp instead.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/text.hpp"
#include "brokers/value_broker.hpp"

namespace broker::brokers {

std::unique_ptr<value_broker> make_github_broker(value_broker::init values);
std::unique_ptr<value_broker> make_bearer_broker(value_broker::init values);
std::unique_ptr<value_broker> make_header_broker(value_broker::init values);
std::unique_ptr<value_broker> make_basic_broker(value_broker::init values);

// One Authorization value as RFC 9110 §11.4 credentials: auth-scheme, 1*SP, then the rest
// (token68 for Bearer/token/Basic). Leading and trailing whitespace around the value is allowed,
// so is any run of spaces or tabs after the scheme. nullopt when there is no scheme and token.
struct auth_value {
  std::string_view scheme;   // as received; compare with iequals
  std::size_t token_at = 0;  // offset of the token in the value
  std::string_view token;    // the rest, trailing whitespace dropped
};
std::optional<auth_value> parse_auth_value(std::string_view value);

bool is_authorization(std::string_view header_name);

// For `Authorization: Basic B64` whose decoded "user:password" has `from` as the user (when
// `user`) and/or as the password (when `password`): replaces those halves with `to` and
// re-encodes the value in place. Returns how many halves were replaced. Every temporary that
// held decoded bytes is wiped.
int swap_basic(std::string& value, const auth_value& auth, std::string_view from,
               std::string_view to, bool user, bool password);

// GitHub's forms (github, github-app): `Bearer X` or `token X`, or either half of `Basic`
// (git sends `x-access-token:TOKEN`). Replaces `from` with `to` in an Authorization value;
// returns how many were replaced.
int swap_github_authorization(std::string& value, std::string_view from, std::string_view to);
// Whether an Authorization value carries `token` in one of those forms.
bool carries_github_token(std::string_view value, std::string_view token);

// The decoded "user:password" of a `Basic` credentials value (any header), or nullopt. The
// caller wipes it.
std::optional<std::string> decode_basic(std::string_view value);

}  // namespace broker::brokers
