// What a dummy keeps of a real value and what it draws: the known prefixes, the public alphabets,
// the families' separators and GitHub's checksum.
#include "brokers/dummy_shape.hpp"

#include <zlib.h>

#include <algorithm>
#include <stdexcept>

namespace broker::brokers {
namespace {

// The public alphabets, smallest first. A run is drawn from the first one at or after its
// family's floor that holds every character of it; the last one holds every run.
enum alphabet_at : std::size_t {
  decimal_digits,
  hex_lower,
  hex_upper,
  base32_upper,  // RFC 4648 §6 (AWS key ids)
  base36_lower,
  base36_upper,
  ascii_letters,
  base62_chars,
  base64url_chars,  // RFC 4648 §5
  base64_chars,     // RFC 4648 §4
  plain_chars,      // what a run of any other characters is drawn from (below)
};

constexpr std::array<std::string_view, 11> public_alphabets{
    "0123456789",
    "0123456789abcdef",
    "0123456789ABCDEF",
    "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567",
    "abcdefghijklmnopqrstuvwxyz0123456789",
    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_",
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
    // What every encoder a dummy meets leaves as it is: RFC 3986's unreserved characters less
    // '~', which a form encoder (WHATWG URLSearchParams, so Node's clients) writes as %7E.
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._",
};

// GitHub's base62 digits, in the order its checksum is written (not the order drawn above).
constexpr std::string_view github_digits =
    "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

std::size_t alphabet_of(std::string_view run, std::size_t floor) {
  for (std::size_t a = floor; a < plain_chars; ++a)
    if (run.find_first_not_of(public_alphabets[a]) == std::string_view::npos) return a;
  return plain_chars;
}

// A family of tokens that client libraries (and secret scanners) recognise by their prefix.
struct token_family {
  std::string_view prefix;
  std::size_t floor = decimal_digits;  // the smallest alphabet its runs are drawn from
  char separator = '\0';               // kept where it stands: it splits the format's parts
  bool github_checksum = false;        // its last part may end in GitHub's checksum
};

// The longest match wins ("sk-ant-api03-" over "sk-ant-" over "sk-").
constexpr std::array<token_family, 42> token_families{{
    // GitHub: classic tokens are 30 base62 characters and a checksum; fine-grained ones are
    // github_pat_, 22 base62 characters, '_' and 59 more.
    {"github_pat_", base62_chars, '_', true},
    {"ghp_", base62_chars, '\0', true},
    {"gho_", base62_chars, '\0', true},
    {"ghu_", base62_chars, '\0', true},
    {"ghs_", base62_chars, '\0', true},
    {"ghr_", base62_chars, '\0', true},
    // OpenAI
    {"sk-proj-"},
    {"sk-svcacct-"},
    {"sk-admin-"},
    {"sk-"},
    // Anthropic
    {"sk-ant-api03-"},
    {"sk-ant-admin01-"},
    {"sk-ant-oat01-"},
    {"sk-ant-ort01-"},
    {"sk-ant-"},
    // Slack: numeric team and user ids and a random part, joined by '-'
    {"xoxb-", decimal_digits, '-'},
    {"xoxp-", decimal_digits, '-'},
    {"xoxa-", decimal_digits, '-'},
    {"xoxe-", decimal_digits, '-'},
    {"xapp-", decimal_digits, '-'},
    // GitLab
    {"glpat-"},
    {"gldt-"},
    {"glptt-"},
    // AWS access key ids (long-term, temporary): 16 base32 characters
    {"AKIA", base32_upper},
    {"ASIA", base32_upper},
    // Package registries and hubs (npm's tokens took GitHub's format, checksum and all)
    {"npm_", base62_chars, '\0', true},
    {"pypi-"},
    {"hf_"},
    {"dckr_pat_"},
    // Stripe
    {"sk_live_"},
    {"sk_test_"},
    {"rk_live_"},
    {"rk_test_"},
    // Google API keys and OAuth access tokens
    {"AIza"},
    {"ya29."},
    // Others that are common in agent environments (SendGrid's keys are SG.<22>.<43>)
    {"gsk_"},
    {"xai-"},
    {"r8_"},
    {"dop_v1_"},
    {"lin_api_"},
    {"shpat_"},
    {"SG.", decimal_digits, '.'},
}};

const token_family* family_of(std::string_view token) {
  const token_family* best = nullptr;
  for (const token_family& f : token_families)
    if ((!best || f.prefix.size() > best->prefix.size()) && token.size() > f.prefix.size() &&
        token.starts_with(f.prefix))
      best = &f;
  return best;
}

void keep(std::vector<shape_piece>& shape, std::size_t at, std::size_t size) {
  if (size > 0) shape.push_back({shape_piece::kind::keep, at, size, {}});
}

void draw(std::vector<shape_piece>& shape, std::size_t at, std::size_t size, std::size_t alphabet) {
  if (size > 0) shape.push_back({shape_piece::kind::draw, at, size, public_alphabets[alphabet]});
}

// A run with no structure of its own: drawn from its alphabet, but for base64's '=' padding at
// its end (how much there is follows from the length).
void shape_run(std::string_view value, std::size_t at, std::size_t end, std::size_t floor,
               std::vector<shape_piece>& shape) {
  const std::string_view run = value.substr(at, end - at);
  std::size_t padding = 0;
  while (padding < 2 && padding + 1 < run.size() && run[run.size() - 1 - padding] == '=') ++padding;
  if (padding > 0) {
    const std::size_t alphabet = alphabet_of(run.substr(0, run.size() - padding), floor);
    if (alphabet != plain_chars) {
      draw(shape, at, run.size() - padding, alphabet);
      keep(shape, end - padding, padding);
      return;
    }
  }
  draw(shape, at, run.size(), alphabet_of(run, floor));
}

// A run of base62 characters whose last 6 are GitHub's checksum of the others.
bool ends_in_github_checksum(std::string_view run) {
  if (run.size() <= 6 || run.find_first_not_of(public_alphabets[base62_chars]) != run.npos)
    return false;
  const std::array<char, 6> sum = github_checksum(run.substr(0, run.size() - 6));
  return run.substr(run.size() - 6) == std::string_view(sum.data(), sum.size());
}

// A known family's token after its prefix: its separators stay, each part between them is a run
// of its own, and a valid checksum at the end stays valid.
void shape_family_body(std::string_view value, const token_family& family,
                       std::vector<shape_piece>& shape) {
  for (std::size_t start = family.prefix.size();;) {
    std::size_t stop = family.separator ? value.find(family.separator, start) : value.npos;
    const bool last = stop == value.npos;
    if (last) stop = value.size();
    const std::string_view part = value.substr(start, stop - start);
    if (last && family.github_checksum && ends_in_github_checksum(part)) {
      draw(shape, start, part.size() - 6, base62_chars);
      shape.push_back({shape_piece::kind::github_checksum, stop - 6, 6, {}});
    } else if (!part.empty()) {
      shape_run(value, start, stop, family.floor, shape);
    }
    if (last) return;
    keep(shape, stop, 1);
    start = stop + 1;
  }
}

bool is_base64url(char c) {
  return public_alphabets[base64url_chars].find(c) != std::string_view::npos;
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

// A UUID (RFC 9562 §4): 8-4-4-4-12 hex digits of one case. Its dashes stay, so do its version
// (the 13th digit, 1-8) and its variant (the 17th, one of 89ab), which are the same in every
// UUID of a kind; the rest is drawn.
bool shape_uuid(std::string_view value, std::vector<shape_piece>& shape) {
  if (value.size() != 36) return false;
  for (std::size_t dash : {8, 13, 18, 23})
    if (value[dash] != '-') return false;
  const bool upper = value.find_first_of("ABCDEF") != value.npos;
  const std::size_t hex = upper ? hex_upper : hex_lower;
  for (std::size_t i = 0; i < value.size(); ++i)
    if (value[i] != '-' && public_alphabets[hex].find(value[i]) == std::string_view::npos)
      return false;
  const bool versioned = value[14] >= '1' && value[14] <= '8';
  const std::string_view variants = upper ? "89AB" : "89ab";
  const bool variant = variants.find(value[19]) != std::string_view::npos;
  draw(shape, 0, 8, hex);
  keep(shape, 8, 1);
  draw(shape, 9, 4, hex);
  keep(shape, 13, 1);
  if (versioned)
    keep(shape, 14, 1);
  else
    draw(shape, 14, 1, hex);
  draw(shape, 15, 3, hex);
  keep(shape, 18, 1);
  if (variant)
    shape.push_back({shape_piece::kind::draw, 19, 1, variants});
  else
    draw(shape, 19, 1, hex);
  draw(shape, 20, 3, hex);
  keep(shape, 23, 1);
  draw(shape, 24, 12, hex);
  return true;
}

void shape_value(std::string_view value, std::vector<shape_piece>& shape) {
  if (const std::size_t signature = jwt_signature_at(value)) {
    keep(shape, 0, signature);
    shape_run(value, signature, value.size(), base64url_chars, shape);
    return;
  }
  if (shape_uuid(value, shape)) return;
  if (const token_family* family = family_of(value)) {
    keep(shape, 0, family->prefix.size());
    shape_family_body(value, *family, shape);
    return;
  }
  shape_run(value, 0, value.size(), decimal_digits, shape);
}

}  // namespace

std::vector<shape_piece> public_shape(std::string_view value) {
  if (value.empty()) throw std::invalid_argument("cannot make a dummy for an empty value");
  std::vector<shape_piece> shape;
  shape_value(value, shape);
  // A value that is all prefix and separators has nothing to draw: then all of it is drawn.
  if (std::none_of(shape.begin(), shape.end(),
                   [](const shape_piece& p) { return p.what == shape_piece::kind::draw; })) {
    shape.clear();
    shape_run(value, 0, value.size(), decimal_digits, shape);
  }
  return shape;
}

std::string_view known_prefix(std::string_view token) {
  const token_family* family = family_of(token);
  return family ? family->prefix : std::string_view();
}

std::array<char, 6> github_checksum(std::string_view random) {
  uLong crc = crc32(0L, Z_NULL, 0);
  crc = crc32(crc, reinterpret_cast<const Bytef*>(random.data()), static_cast<uInt>(random.size()));
  std::array<char, 6> digits{};
  for (std::size_t i = digits.size(); i-- > 0; crc /= github_digits.size())
    digits[i] = github_digits[crc % github_digits.size()];
  return digits;
}

}  // namespace broker::brokers
