// Shared by the policy parsing tests: parse a text and capture the policy_error it throws.
#pragma once

#include <string>

#include "config/policy.hpp"

namespace broker::config::test {

struct caught {
  bool thrown = false;
  std::string what;
  int line = -1;
  std::string key;
  std::string message;
};

inline caught error_of(const std::string& text, const std::string& source = "policy.json") {
  caught c;
  try {
    broker::config::parse_policy(text, source);
  } catch (const broker::config::policy_error& e) {
    c.thrown = true;
    c.what = e.what();
    c.line = e.line();
    c.key = e.key();
    c.message = e.message();
  }
  return c;
}

}  // namespace broker::config::test
