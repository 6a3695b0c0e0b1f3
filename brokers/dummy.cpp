// Dummy credentials: the real value's public shape (brokers/dummy_shape.hpp), every other
// character random (from the CSPRNG, or from a stream derived from a session's seed or a user's
// key).
#include "brokers/dummy.hpp"

#include <algorithm>
#include <array>
#include <stdexcept>
#include <vector>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

namespace broker::brokers {
namespace {

// Uniform random values below `bound` from the CSPRNG or a seeded stream, by rejection sampling
// (no modulo bias).
class random_source {
 public:
  explicit random_source(seeded_bytes* seeded = nullptr) : seeded_(seeded) {}
  ~random_source() { OPENSSL_cleanse(pool_.data(), pool_.size()); }
  random_source(const random_source&) = delete;
  random_source& operator=(const random_source&) = delete;

  unsigned below(unsigned bound) {
    const unsigned limit = 256 - 256 % bound;  // largest multiple of bound that fits a byte
    for (;;) {
      if (next_ == pool_.size()) refill();
      unsigned byte = pool_[next_++];
      if (byte < limit) return byte % bound;
    }
  }

 private:
  void refill() {
    if (seeded_)
      seeded_->fill(pool_.data(), pool_.size());
    else if (RAND_bytes(pool_.data(), static_cast<int>(pool_.size())) != 1)
      throw std::runtime_error("the system random number generator failed");
    next_ = 0;
  }
  seeded_bytes* seeded_;  // null: the CSPRNG
  std::array<unsigned char, 64> pool_{};
  std::size_t next_ = 64;
};

// Appends a length-prefixed field to a label, so that no two (credential, field) pairs make the
// same label ("ab" + "c" and "a" + "bc" differ).
void append_field(std::string& label, std::string_view field) {
  const auto size = static_cast<std::uint32_t>(field.size());
  for (int shift = 24; shift >= 0; shift -= 8) label.push_back(static_cast<char>(size >> shift));
  label.append(field);
}

// A dummy of `real`'s public shape, its drawn characters from `rng`: one code path for the
// CSPRNG, a session's seed and a user's key.
std::string shaped_dummy(const base::secret& real, random_source& rng) {
  const std::string_view value = real.expose();
  const std::vector<shape_piece> shape = public_shape(value);
  std::string dummy(value.size(), '\0');
  do {
    for (std::size_t i = 0; i < shape.size(); ++i) {
      const shape_piece& p = shape[i];
      switch (p.what) {
        case shape_piece::kind::keep:
          value.copy(dummy.data() + p.at, p.size, p.at);
          break;
        case shape_piece::kind::draw:
          for (std::size_t j = 0; j < p.size; ++j)
            dummy[p.at + j] = p.alphabet[rng.below(static_cast<unsigned>(p.alphabet.size()))];
          break;
        case shape_piece::kind::github_checksum: {
          const shape_piece& random = shape[i - 1];
          const std::array<char, 6> sum =
              github_checksum(std::string_view(dummy).substr(random.at, random.size));
          std::copy(sum.begin(), sum.end(), dummy.begin() + static_cast<std::ptrdiff_t>(p.at));
          break;
        }
      }
    }
  } while (dummy == value);  // ~2^-100 for real tokens; likely only for one-character values
  return dummy;
}

}  // namespace

std::string make_dummy(const base::secret& real) {
  random_source rng;
  return shaped_dummy(real, rng);
}

std::string make_dummy(const base::secret& real, seeded_bytes& source) {
  random_source rng(&source);
  return shaped_dummy(real, rng);
}

seeded_bytes::seeded_bytes(std::string_view seed, std::string_view label) : seed_(seed) {
  // Sized once: a label may hold a real value (keyed_dummy), and a reallocation would leave a
  // copy of it behind unwiped.
  label_.reserve(label.size() + 8);
  label_.assign(label);
  label_.append(8, '\0');  // the counter's place
}

seeded_bytes::~seeded_bytes() {
  base::wipe(seed_);
  base::wipe(label_);
  OPENSSL_cleanse(block_.data(), block_.size());
}

void seeded_bytes::fill(unsigned char* out, std::size_t size) {
  for (std::size_t i = 0; i < size; ++i) {
    if (used_ == block_.size()) next_block();
    out[i] = block_[used_++];
  }
}

void seeded_bytes::next_block() {
  const std::size_t at = label_.size() - 8;
  for (int i = 0; i < 8; ++i) label_[at + i] = static_cast<char>(counter_ >> (56 - 8 * i));
  ++counter_;
  unsigned int size = 0;
  if (HMAC(EVP_sha256(), seed_.data(), static_cast<int>(seed_.size()),
           reinterpret_cast<const unsigned char*>(label_.data()), label_.size(), block_.data(),
           &size) == nullptr ||
      size != block_.size())
    throw std::runtime_error("HMAC-SHA256 failed");
  used_ = 0;
}

dummy_seed::dummy_seed(std::string_view seed) : seed_(std::string(seed)) {
  if (seed.size() < min_size)
    throw std::invalid_argument("a session's dummy seed must have at least " +
                                std::to_string(min_size) + " bytes");
}

std::string dummy_seed::dummy(const base::secret& shape, std::string_view credential,
                              std::string_view field) const {
  std::string label = "broker session dummy v1";
  append_field(label, credential);
  append_field(label, field);
  seeded_bytes source(seed_.expose(), label);
  return make_dummy(shape, source);
}

std::string keyed_dummy(const base::secret& key, const base::secret& real,
                        std::string_view credential, std::string_view field) {
  if (key.size() < dummy_seed::min_size)
    throw std::invalid_argument("a dummy key must have at least " +
                                std::to_string(dummy_seed::min_size) + " bytes");
  std::string label;
  label.reserve(64 + credential.size() + field.size() + real.size());
  label = "broker user dummy v1";
  append_field(label, credential);
  append_field(label, field);
  append_field(label, real.expose());
  seeded_bytes source(key.expose(), label);
  base::wipe(label);
  return make_dummy(real, source);
}

base::secret new_dummy_seed() {
  std::string bytes(32, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(bytes.data()), static_cast<int>(bytes.size())) !=
      1)
    throw std::runtime_error("the system random number generator failed");
  return base::secret(std::move(bytes));
}

}  // namespace broker::brokers
