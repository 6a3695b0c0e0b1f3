// Dummy credentials (DESIGN §5): random per session (CSPRNG), same length as the real value,
// the same known prefix (ghp_, github_pat_, sk-proj-, sk-ant-api03-, AKIA, xoxb-, ...), and every
// other character replaced by a random one of the same class (upper, lower, digit); other
// characters ('-', '_', '.', ...) stay where they are. Never equal to the real value. A JWT keeps
// its header and claims, decodable as before, with a random signature of the same shape.
#pragma once

#include <string>
#include <string_view>

#include "brokers/secret.hpp"

namespace broker::brokers {

// The known prefix of a token, or "" when it has none this table knows.
std::string_view known_prefix(std::string_view token);

std::string make_dummy(const secret& real);

}  // namespace broker::brokers
