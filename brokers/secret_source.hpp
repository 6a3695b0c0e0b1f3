// Where a credential's real value comes from (docs/policy.md "source"): "env:NAME", "file:PATH"
// (a leading "~/" is the home directory; surrounding whitespace trimmed) or "cmd:COMMAND" (run
// once through /bin/sh -c, stdout trimmed; bounded output and run time).
#pragma once

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>

#include "base/secret.hpp"

namespace broker::brokers {

// A source that exists but cannot be read: unreadable file, failing command. The message names
// the source, never its value.
class source_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct source_limits {
  std::size_t max_bytes = 64 * 1024;
  std::chrono::milliseconds timeout{30'000};
};

// The value, or nullopt when the source is simply absent (an unset or empty variable, a missing
// file): the credential is then not brokered. Throws source_error otherwise.
std::optional<base::secret> load_secret(const std::string& source,
                                        const source_limits& limits = {});

// load_secret without the trimming, for multi-line formats whose errors cite line numbers (an
// AWS credentials file): the bytes as read, and an existing empty file is an empty value.
std::optional<base::secret> load_secret_untrimmed(const std::string& source,
                                                  const source_limits& limits = {});

// After loading: an "env:NAME" source's value is wiped from this process's environment block
// and the variable removed (other sources: nothing to do).
void forget_environment_source(const std::string& source);

}  // namespace broker::brokers
