// For tests of credential sources: the message of the source_error `f` throws, "" when none.
#pragma once

#include <string>

#include "brokers/secret_source.hpp"

namespace broker::test {

template <typename F>
std::string source_error_of(F&& f) {
  try {
    (void)f();
  } catch (const brokers::source_error& e) {
    return e.what();
  }
  return {};
}

}  // namespace broker::test
