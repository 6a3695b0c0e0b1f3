// The per-user Ed25519 key that signs each session's chain head (docs/audit-log.md), so that an
// editor of a log who holds no key cannot re-chain it: `~/.config/broker/audit-key` (PEM PKCS#8,
// 0600), made on first use, hidden from every wrapped command with the rest of ~/.config/broker.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "certs/ca.hpp"

namespace broker::session {

// $HOME/.config/broker/audit-key; empty when HOME is not an absolute path.
std::filesystem::path default_audit_key_path();

class audit_key {
 public:
  // Reads the key at `path`, first making it (0600, its directory 0700) when there is none; two
  // sessions starting at once end up with the same key. Throws std::runtime_error naming the
  // file: unreadable, not an Ed25519 key, or readable by others.
  static audit_key load_or_create(const std::filesystem::path& path);
  // Reads a key, private or public (PEM), to check signatures with. Throws std::runtime_error.
  static audit_key load(const std::filesystem::path& path);

  // The raw 32-byte public key, lower-case hex: what a signature names its signer by.
  std::string public_key_hex() const;
  // Signs the chain head `head_hex` (the SHA-256 hex a record would have had unsigned); the
  // signature in lower-case hex. Throws std::runtime_error when the key is public only.
  std::string sign_head(std::string_view head_hex) const;

 private:
  explicit audit_key(certs::pkey_ptr key) : key_(std::move(key)) {}
  certs::pkey_ptr key_;
};

// Whether `signature_hex` is `public_key_hex`'s signature of the chain head `head_hex`.
bool head_signature_valid(std::string_view public_key_hex, std::string_view head_hex,
                          std::string_view signature_hex);

}  // namespace broker::session
