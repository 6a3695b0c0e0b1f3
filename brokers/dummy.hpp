// Dummy credentials (docs/policy.md): the real value's public shape and nothing else of it
// (brokers/dummy_shape.hpp): its length, a known prefix (ghp_, github_pat_, sk-proj-,
// sk-ant-api03-, AKIA, xoxb-, ...), a JWT's header and claims, a family's separators, and
// GitHub's checksum, valid for the dummy, where the real value's is; every other character is
// drawn uniformly from the whole of a public alphabet (base62, base64url, hex, ...), never kept
// per position from the real value. Never equal to the real value.
//
// The randomness comes from one of three places; the shaping is one code path for all:
// - a per-user key and the real value (wrap, brokers/dummy_key.hpp): the same user gets the same
//   dummy for the same real value in every session, so an agent's memory of its key holds;
// - a session's seed (a team gateway's session, docs/gateway.md): replicas that loaded the same
// real
//   values give the session the same dummies, derived from its seed, the credential's name and
//   which of its values the dummy stands for;
// - the CSPRNG (tokens that rotate, and `serve`).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/secret.hpp"
#include "brokers/dummy_shape.hpp"

namespace broker::brokers {

// A deterministic byte stream: HMAC-SHA256(seed, label ‖ counter) blocks, the counter a 64-bit
// big-endian number from 0 (a key derivation in counter mode, NIST SP 800-108 §4.1). Equal seeds
// and labels give equal streams in every process; the stream tells nothing of the seed, and
// streams of different labels are independent. Its state is wiped when it is destroyed.
class seeded_bytes {
 public:
  seeded_bytes(std::string_view seed, std::string_view label);
  ~seeded_bytes();
  seeded_bytes(const seeded_bytes&) = delete;
  seeded_bytes& operator=(const seeded_bytes&) = delete;

  // The next `size` bytes of the stream.
  void fill(unsigned char* out, std::size_t size);

 private:
  void next_block();
  std::string seed_, label_;
  std::array<unsigned char, 32> block_{};
  std::size_t used_ = 32;  // of block_
  std::uint64_t counter_ = 0;
};

// One session's seed for its dummies, held as a secret (whoever has it can derive the session's
// dummies). The gateway's registry keeps 32 random bytes per session (new_dummy_seed).
class dummy_seed {
 public:
  static constexpr std::size_t min_size = 16;
  // Throws std::invalid_argument for a seed shorter than min_size bytes (an empty or short
  // seed would give many sessions the same dummies).
  explicit dummy_seed(std::string_view seed);

  // The dummy of credential `credential`'s value `field` ("value", "key id", "access token"...)
  // shaped like `shape`: the same for the same seed, credential, field and shape.
  std::string dummy(const base::secret& shape, std::string_view credential,
                    std::string_view field) const;

 private:
  base::secret seed_;
};

// The dummy of credential `credential`'s value `field` whose real value is `real`, under a
// per-user `key` (at least dummy_seed::min_size bytes; throws std::invalid_argument otherwise):
// the same for the same key, credential, field and real value; another real value gets another
// dummy. Without the key the dummy tells nothing of the real value.
std::string keyed_dummy(const base::secret& key, const base::secret& real,
                        std::string_view credential, std::string_view field);

// 32 bytes from the CSPRNG: a new session's seed.
base::secret new_dummy_seed();

// A dummy shaped like `real`, random from the CSPRNG.
std::string make_dummy(const base::secret& real);
// A dummy shaped like `real`, its random characters drawn from `source`: the same source stream
// gives the same dummy.
std::string make_dummy(const base::secret& real, seeded_bytes& source);

}  // namespace broker::brokers
