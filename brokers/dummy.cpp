// Per-session dummy credentials: the real token's known prefix and shape, random everywhere else
// (from the CSPRNG, or from a stream derived from a session's seed).
#include "brokers/dummy.hpp"

#include <array>
#include <stdexcept>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

namespace broker::brokers {
namespace {

// Prefixes that client libraries (and secret scanners) use to recognise a token's kind. Kept
// verbatim in the dummy so format checks pass; the longest match wins ("sk-ant-api03-" over
// "sk-ant-" over "sk-").
constexpr std::array<std::string_view, 42> prefixes{
    // GitHub
    "github_pat_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_",
    // OpenAI
    "sk-proj-", "sk-svcacct-", "sk-admin-", "sk-",
    // Anthropic
    "sk-ant-api03-", "sk-ant-admin01-", "sk-ant-oat01-", "sk-ant-ort01-", "sk-ant-",
    // Slack
    "xoxb-", "xoxp-", "xoxa-", "xoxe-", "xapp-",
    // GitLab
    "glpat-", "gldt-", "glptt-",
    // AWS access key ids (long-term, temporary)
    "AKIA", "ASIA",
    // Package registries and hubs
    "npm_", "pypi-", "hf_", "dckr_pat_",
    // Stripe
    "sk_live_", "sk_test_", "rk_live_", "rk_test_",
    // Google API keys and OAuth access tokens
    "AIza", "ya29.",
    // Others that are common in agent environments
    "gsk_", "xai-", "r8_", "dop_v1_", "lin_api_", "shpat_", "SG."};

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

enum class char_class { upper, lower, digit, other };

char_class class_of(char c) {
  if (c >= 'A' && c <= 'Z') return char_class::upper;
  if (c >= 'a' && c <= 'z') return char_class::lower;
  if (c >= '0' && c <= '9') return char_class::digit;
  return char_class::other;
}

char random_of(char_class k, random_source& rng) {
  switch (k) {
    case char_class::upper:
      return static_cast<char>('A' + rng.below(26));
    case char_class::lower:
      return static_cast<char>('a' + rng.below(26));
    case char_class::digit:
      return static_cast<char>('0' + rng.below(10));
    case char_class::other:
      break;
  }
  static constexpr std::string_view alnum =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  return alnum[rng.below(static_cast<unsigned>(alnum.size()))];
}

bool is_base64url(char c) {
  return class_of(c) != char_class::other || c == '-' || c == '_';
}

// Where a JWT's signature starts (after the second '.'), or 0 when `value` is no JWT: three
// base64url segments, the header a JSON object ("eyJ" is base64 of `{"`).
std::size_t jwt_signature_at(std::string_view value) {
  if (!value.starts_with("eyJ")) return 0;
  const std::size_t first = value.find('.');
  const std::size_t second = first == std::string_view::npos ? first : value.find('.', first + 1);
  if (second == std::string_view::npos || second + 1 >= value.size()) return 0;
  for (std::size_t i = 0; i < value.size(); ++i)
    if (i != first && i != second && !is_base64url(value[i])) return 0;
  return second + 1;
}

// Appends a length-prefixed field to a label, so that no two (credential, field) pairs make the
// same label ("ab" + "c" and "a" + "bc" differ).
void append_field(std::string& label, std::string_view field) {
  const auto size = static_cast<std::uint32_t>(field.size());
  for (int shift = 24; shift >= 0; shift -= 8) label.push_back(static_cast<char>(size >> shift));
  label.append(field);
}

}  // namespace

std::string_view known_prefix(std::string_view token) {
  std::string_view best;
  for (std::string_view p : prefixes)
    if (p.size() > best.size() && token.size() > p.size() && token.starts_with(p)) best = p;
  return best;
}

// A dummy shaped like `real`, its random characters from `rng`.
std::string shaped_dummy(const base::secret& real, random_source& rng) {
  std::string_view value = real.expose();
  if (value.empty()) throw std::invalid_argument("cannot make a dummy for an empty value");
  // A JWT keeps its header and claims (expiry, account, plan: clients decode them) and gets a
  // random signature; other tokens keep their known prefix.
  const std::size_t jwt = jwt_signature_at(value);
  const std::size_t keep = jwt ? jwt : known_prefix(value).size();

  // A value with no letters or digits after its prefix has no shape to keep; then every
  // position is randomised so the dummy can still differ from it.
  bool shaped = false;
  for (std::size_t i = keep; i < value.size() && !shaped; ++i)
    shaped = class_of(value[i]) != char_class::other;

  std::string dummy(value);
  do {
    for (std::size_t i = shaped ? keep : 0; i < value.size(); ++i) {
      char_class k = class_of(value[i]);
      if (k != char_class::other || !shaped) dummy[i] = random_of(k, rng);
    }
  } while (dummy == value);  // ~2^-100 for real tokens; likely only for one-character values
  return dummy;
}

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
