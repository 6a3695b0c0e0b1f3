// Per-session dummy credentials: the real token's known prefix and shape, random everywhere else.
#include "brokers/dummy.hpp"

#include <array>
#include <stdexcept>

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

// Uniform random values below `bound` from the CSPRNG, by rejection sampling (no modulo bias).
class random_source {
 public:
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
    if (RAND_bytes(pool_.data(), static_cast<int>(pool_.size())) != 1)
      throw std::runtime_error("the system random number generator failed");
    next_ = 0;
  }
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

}  // namespace

std::string_view known_prefix(std::string_view token) {
  std::string_view best;
  for (std::string_view p : prefixes)
    if (p.size() > best.size() && token.size() > p.size() && token.starts_with(p)) best = p;
  return best;
}

std::string make_dummy(const secret& real) {
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

  random_source rng;
  std::string dummy(value);
  do {
    for (std::size_t i = shaped ? keep : 0; i < value.size(); ++i) {
      char_class k = class_of(value[i]);
      if (k != char_class::other || !shaped) dummy[i] = random_of(k, rng);
    }
  } while (dummy == value);  // ~2^-100 for real tokens; likely only for one-character values
  return dummy;
}

}  // namespace broker::brokers
