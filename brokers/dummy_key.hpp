// wrap's stable dummies (docs/policy.md): derived from the real value with a per-user key,
// `~/.config/broker/dummy-key` (32 random bytes as 64 hex digits, 0600), made on first use and
// hidden from every wrapped command with the rest of ~/.config/broker. The same user gets the
// same dummy for the same real value in every session, so an agent's own memory of its key
// (Claude Code's approved keys, a config that pins one) holds from one session to the next; a
// rotated real key gets a new dummy.
#pragma once

#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "base/secret.hpp"

namespace broker::brokers {

// $HOME/.config/broker/dummy-key; empty when HOME is not an absolute path.
std::filesystem::path default_dummy_key_path();

// Reads the key at `path`, first making it (0600, its directory 0700) when there is none; two
// sessions starting at once end up with the same key. Throws std::runtime_error naming the file:
// unreadable, not a dummy key, or not this user's own and private. Never a random stand-in.
base::secret load_or_create_dummy_key(const std::filesystem::path& path);

class stable_dummies {
 public:
  // Under `key` (at least dummy_seed::min_size bytes, or dummy() throws std::invalid_argument).
  explicit stable_dummies(base::secret key);
  // Under the key in `file`, read (or made) when the first dummy is asked for: a session with no
  // credential to broker needs no key. An empty path is an error then ("HOME is not set").
  explicit stable_dummies(std::filesystem::path file);

  // The dummy of credential `credential`'s value `field` ("value", "key id", a login file's
  // member...) whose real value is `real` (brokers/dummy.hpp, keyed_dummy). Throws
  // std::runtime_error when the key cannot be had. Safe from several threads.
  std::string dummy(const base::secret& real, std::string_view credential,
                    std::string_view field) const;

 private:
  std::filesystem::path file_;
  mutable std::mutex mutex_;
  mutable std::optional<base::secret> key_;
};

}  // namespace broker::brokers
