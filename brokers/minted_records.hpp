// What a session minted and must revoke (docs/policy.md, "Minted credentials"): one file per
// minted credential under ~/.config/broker/minted/ (0700, hidden from every wrapped command with
// the rest of ~/.config/broker), locked (flock) by the process that minted it for as long as it
// runs. The credential is sealed with AES-256-GCM under a key derived from the signing key it was
// minted with, so the file is worth nothing to whoever lacks that key (who could mint one
// anyway). A session that starts revokes what a dead one left: a record whose lock is free.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "base/secret.hpp"

namespace broker::brokers {

// $HOME/.config/broker/minted; empty when HOME is not an absolute path.
std::filesystem::path default_minted_dir();

// The sealing key for records of `issuer` ("github-app https://api.github.com 123/456"), derived
// from the key that signs the mint requests: HMAC-SHA256(signing_key, label ‖ issuer).
base::secret minted_seal_key(const base::secret& signing_key, std::string_view issuer);

class minted_record {
 public:
  // Writes the record of `credential` (sealed), locked by this process; with an empty `dir`,
  // keeps it in memory only. Throws std::runtime_error naming the file when it cannot.
  static std::unique_ptr<minted_record> write(const std::filesystem::path& dir,
                                              std::string_view issuer, const base::secret& seal_key,
                                              const base::secret& credential,
                                              std::chrono::system_clock::time_point expires);
  ~minted_record();  // unlocks; the file stays unless removed
  minted_record(const minted_record&) = delete;
  minted_record& operator=(const minted_record&) = delete;

  const base::secret& credential() const { return credential_; }
  std::chrono::system_clock::time_point expires() const { return expires_; }
  // After the credential was revoked: the file goes.
  void remove();

 private:
  minted_record(std::filesystem::path path, int fd, base::secret credential,
                std::chrono::system_clock::time_point expires);
  std::filesystem::path path_;
  int fd_;
  base::secret credential_;
  std::chrono::system_clock::time_point expires_;
};

// Every record of `issuer` in `dir` that no live process holds: expired ones are removed, the
// others' credentials handed to `revoke`, and removed when it returns true. Returns how many
// were revoked. A record another issuer wrote, or one that does not open, is left alone.
int revoke_left_records(const std::filesystem::path& dir, std::string_view issuer,
                        const base::secret& seal_key,
                        const std::function<bool(const base::secret&)>& revoke);

}  // namespace broker::brokers
