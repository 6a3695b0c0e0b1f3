#include "brokers/dummy.hpp"

#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "tests/unit/brokers/dummy_alphabets.hpp"

namespace base = broker::base;

using broker::base::secret;
using broker::brokers::dummy_seed;
using broker::brokers::github_checksum;
using broker::brokers::keyed_dummy;
using broker::brokers::known_prefix;
using broker::brokers::make_dummy;
using broker::brokers::new_dummy_seed;
using broker::brokers::seeded_bytes;

namespace {

using namespace broker::brokers::test;

const std::string seed_a = "0123456789abcdef0123456789abcdef";
const std::string seed_b = "fedcba9876543210fedcba9876543210";

// Token-shaped test values are assembled at run time so that no literal in the repository looks
// like a leaked credential to a secret scanner: `size` characters stepping through `alphabet`.
std::string cycle(std::string_view alphabet, std::size_t size, std::size_t start = 0) {
  std::string out;
  for (std::size_t i = 0; i < size; ++i) out += alphabet[(start + i * 7) % alphabet.size()];
  return out;
}

std::string checksum(std::string_view random) {
  const auto sum = github_checksum(random);
  return std::string(sum.begin(), sum.end());
}

// A classic GitHub token (or npm's) whose checksum is valid.
std::string github_token(std::string_view prefix, std::size_t start = 0) {
  const std::string random = cycle(base62, 30, start);
  return std::string(prefix) + random + checksum(random);
}

bool drawn_from(std::string_view s, std::string_view alphabet) {
  return s.find_first_not_of(alphabet) == std::string_view::npos;
}

// The part after the token's last '_' ends in GitHub's checksum of the rest of it.
bool checksum_valid(std::string_view token) {
  const std::string_view body = token.substr(token.rfind('_') + 1);
  return body.size() > 6 &&
         checksum(body.substr(0, body.size() - 6)) == body.substr(body.size() - 6);
}

struct family_case {
  std::string prefix;
  std::string body;
  std::string_view alphabet;  // the body's, which the dummy's is drawn from
};

// A token of each family: its prefix and a body of its alphabet.
std::vector<family_case> family_cases() {
  constexpr std::string_view letters = base62.substr(0, 52);
  return {{"ghp_", cycle(base62, 36), base62},
          {"gho_", cycle(base62, 36, 5), base62},
          {"ghu_", cycle(base62, 36, 9), base62},
          {"ghs_", cycle(base62, 36, 11), base62},
          {"ghr_", cycle(base62, 36, 13), base62},
          {"sk-proj-", cycle(base64url, 156), base64url},
          {"sk-svcacct-", cycle(base64url, 120, 3), base64url},
          {"sk-admin-", cycle(base64url, 120, 4), base64url},
          {"sk-ant-api03-", cycle(base64url, 93) + "AA", base64url},
          {"sk-ant-admin01-", cycle(base64url, 93, 2) + "AA", base64url},
          {"sk-ant-", cycle(base64url, 60, 6), base64url},
          {"sk-", cycle(base62, 48), base62},
          {"glpat-", cycle(base64url, 20, 1), base64url},
          {"AKIA", cycle(base32, 16), base32},
          {"ASIA", cycle(base32, 16, 3), base32},
          {"npm_", cycle(base62, 36, 2), base62},
          {"pypi-", cycle(base64url, 150, 8), base64url},
          {"hf_", cycle(letters, 34), letters},
          {"dop_v1_", cycle("0123456789abcdef", 64), "0123456789abcdef"}};
}

}  // namespace

TEST_CASE("dummies keep prefix, length and alphabet", "[brokers][dummy]") {
  for (const family_case& c : family_cases()) {
    INFO("prefix " << c.prefix);  // the prefix is public; the fake token is not printed
    const std::string real_text = c.prefix + c.body;
    CHECK(known_prefix(real_text) == c.prefix);
    base::secret real{std::string(real_text)};
    const std::string a = make_dummy(real), b = make_dummy(real);
    CHECK(a.size() == real_text.size());
    CHECK(a.starts_with(c.prefix));
    CHECK(drawn_from(a.substr(c.prefix.size()), c.alphabet));
    CHECK(a != real_text);
    CHECK(a != b);
  }
}

TEST_CASE("a fine-grained GitHub token's and a Slack token's separators stay", "[brokers][dummy]") {
  const std::string pat = "github_pat_" + cycle(base62, 22) + "_" + cycle(base62, 59, 4);
  const std::string pat_dummy = make_dummy(base::secret(std::string(pat)));
  CHECK(pat_dummy.size() == pat.size());
  CHECK(pat_dummy.starts_with("github_pat_"));
  CHECK(pat_dummy[33] == '_');
  CHECK(drawn_from(pat_dummy.substr(11, 22), base62));
  CHECK(drawn_from(pat_dummy.substr(34), base62));

  const std::string slack =
      "xoxb-" + cycle("0123456789", 12) + "-" + cycle("0123456789", 13) + "-" + cycle(base62, 24);
  const std::string slack_dummy = make_dummy(base::secret(std::string(slack)));
  CHECK(slack_dummy.size() == slack.size());
  CHECK(slack_dummy.starts_with("xoxb-"));
  CHECK(drawn_from(slack_dummy.substr(5, 12), "0123456789"));
  CHECK(slack_dummy[17] == '-');
  CHECK(drawn_from(slack_dummy.substr(18, 13), "0123456789"));
  CHECK(slack_dummy[31] == '-');
  CHECK(drawn_from(slack_dummy.substr(32), base62));
  CHECK(slack_dummy != slack);
}

TEST_CASE("a GitHub token's dummy has a valid checksum where the real one has",
          "[brokers][dummy]") {
  const base::secret key{std::string(32, 'k')};
  for (const char* prefix : {"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "npm_"}) {
    INFO("prefix " << prefix);
    const std::string real_text = github_token(prefix);
    REQUIRE(checksum_valid(real_text));
    const base::secret real{std::string(real_text)};
    for (int i = 0; i < 200; ++i) {
      const std::string d = make_dummy(real);
      CHECK(d.size() == 40);
      CHECK(d.starts_with(prefix));
      CHECK(drawn_from(d.substr(4), base62));
      CHECK(checksum_valid(d));
      CHECK(d.substr(4, 30) != real_text.substr(4, 30));
    }
    // The seeded and keyed dummies too: one code path.
    CHECK(checksum_valid(dummy_seed(seed_a).dummy(real, "github", "value")));
    CHECK(checksum_valid(keyed_dummy(key, real, "github", "value")));
  }
  // A fine-grained token whose last part ends in a valid checksum.
  const std::string random = cycle(base62, 53, 17);
  const std::string pat = "github_pat_" + cycle(base62, 22) + "_" + random + checksum(random);
  REQUIRE(checksum_valid(pat));
  CHECK(checksum_valid(make_dummy(base::secret(std::string(pat)))));

  // A real token whose checksum is not valid gets a dummy whose last 6 characters are drawn too
  // (seeded, so that the one dummy in 2^32 whose drawn characters happen to make a valid
  // checksum cannot make the test fail).
  std::string invalid = github_token("ghp_");
  invalid.back() = invalid.back() == 'A' ? 'B' : 'A';
  const base::secret invalid_real{std::string(invalid)};
  for (int i = 0; i < 50; ++i) {
    const std::string d = dummy_seed(seed_a).dummy(invalid_real, "c" + std::to_string(i), "v");
    CHECK(drawn_from(d.substr(4), base62));
    CHECK_FALSE(checksum_valid(d));
  }
}

namespace {

// How many of a real value's dummies have, position by position after the prefix, a digit and
// an upper-case letter there.
struct class_counts {
  std::vector<int> digits, upper;
};

template <class Dummy>
class_counts count_classes(std::size_t prefix, std::size_t body, int dummies, Dummy dummy) {
  class_counts counts{std::vector<int>(body), std::vector<int>(body)};
  for (int i = 0; i < dummies; ++i) {
    const std::string d = dummy(i);
    for (std::size_t p = 0; p < body; ++p) {
      const char c = d[prefix + p];
      counts.digits[p] += c >= '0' && c <= '9';
      counts.upper[p] += c >= 'A' && c <= 'Z';
    }
  }
  return counts;
}

// Every position's counts are those of characters drawn uniformly from base62 (10 digits and 26
// upper-case letters of 62), within about 7 standard deviations: a CSPRNG run fails about once
// in 10^10, and a dummy that kept the real value's classes (all digits, or none) fails at once.
void check_uniform(const class_counts& counts, int dummies) {
  const double digits = dummies * 10.0 / 62, upper = dummies * 26.0 / 62;
  for (std::size_t p = 0; p < counts.digits.size(); ++p) {
    INFO("position " << p << ": " << counts.digits[p] << " digits, " << counts.upper[p]
                     << " upper-case letters");
    CHECK(std::abs(counts.digits[p] - digits) < 120);  // sd 16.5 for 2000 dummies
    CHECK(std::abs(counts.upper[p] - upper) < 160);    // sd 22.1
  }
}

}  // namespace

TEST_CASE("a dummy keeps no position's class from the real value", "[brokers][dummy]") {
  // Two real values of one alphabet (GitHub's base62) that differ only in their characters'
  // classes: all digits after the prefix, and all letters.
  const std::string digits = "ghp_" + cycle("0123456789", 36);
  const std::string letters = "ghp_" + cycle(base62.substr(0, 52), 36);
  constexpr int dummies = 2000;
  for (const std::string& real_text : {digits, letters}) {
    const base::secret real{std::string(real_text)};
    // From the CSPRNG.
    check_uniform(count_classes(4, 36, dummies, [&](int) { return make_dummy(real); }), dummies);
    // From a session's seed, a stream per credential name: the same counts every run.
    const dummy_seed seed(seed_a);
    check_uniform(
        count_classes(4, 36, dummies,
                      [&](int i) { return seed.dummy(real, "c" + std::to_string(i), "value"); }),
        dummies);
  }
}

TEST_CASE("dummies are spread over the whole of their alphabet", "[brokers][dummy]") {
  // A body of one repeated letter: each of base62's 62 characters appears at every position, and
  // about as often as the others.
  const base::secret real{"ghp_" + std::string(36, 'q')};
  constexpr int dummies = 2000;
  std::vector<std::array<int, 128>> seen(36);
  std::array<int, 128> total{};
  for (int i = 0; i < dummies; ++i) {
    const std::string d = make_dummy(real);
    REQUIRE(drawn_from(d.substr(4), base62));
    for (std::size_t p = 0; p < 36; ++p) {
      ++seen[p][static_cast<unsigned char>(d[4 + p])];
      ++total[static_cast<unsigned char>(d[4 + p])];
    }
  }
  for (std::size_t p = 0; p < 36; ++p)
    for (char c : base62) CHECK(seen[p][static_cast<unsigned char>(c)] > 0);  // each: 10^-14
  const double expected = dummies * 36.0 / 62;                                // 1161.3, sd 33.8
  for (char c : base62) {
    INFO("character " << c);
    CHECK(std::abs(total[static_cast<unsigned char>(c)] - expected) < 250);
  }
}

TEST_CASE("dummies of degenerate values still differ", "[brokers][dummy]") {
  base::secret dashes{std::string("--------")};
  std::string d = make_dummy(dashes);
  CHECK(d.size() == 8);
  CHECK(d != "--------");
  CHECK(drawn_from(d, base64url));

  base::secret one_digit{std::string("7")};
  for (int i = 0; i < 50; ++i) {
    std::string x = make_dummy(one_digit);
    CHECK(x.size() == 1);
    CHECK(x != "7");
    CHECK((x[0] >= '0' && x[0] <= '9'));
  }

  // Spaces, quotes, bytes past ASCII: a dummy of the same length in plain characters.
  const std::string odd = "p\xc3\xa4ss word \"x\"";
  const std::string o = make_dummy(base::secret(std::string(odd)));
  CHECK(o.size() == odd.size());
  CHECK(drawn_from(o, plain));

  CHECK_THROWS_AS(make_dummy(base::secret{}), std::invalid_argument);
}

TEST_CASE("a JWT's dummy keeps its header and claims and changes only the signature",
          "[brokers][dummy]") {
  // {"alg":"RS256","typ":"JWT"} . {"exp":1900000000,"chatgpt_plan_type":"plus"} . signature
  const std::string head = "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9";
  const std::string claims = "eyJleHAiOjE5MDAwMDAwMDAsImNoYXRncHRfcGxhbl90eXBlIjoicGx1cyJ9";
  const std::string signature = "Qm9ndXNTaWduYXR1cmUtX0FCQ0RFRkdISUpLTE1OT1BRUlNUVVZXWFla";
  const std::string jwt = head + "." + claims + "." + signature;
  const std::string dummy = make_dummy(base::secret(std::string(jwt)));
  REQUIRE(dummy.size() == jwt.size());
  CHECK(dummy.starts_with(head + "." + claims + "."));
  CHECK(dummy.substr(head.size() + claims.size() + 2) != signature);
  CHECK(drawn_from(dummy.substr(head.size() + claims.size() + 2), base64url));
}

TEST_CASE("a dotted token that is no JWT is drawn as a whole", "[brokers][dummy]") {
  const std::string token = "abcDEF123.ghiJKL456.mnoPQR789";  // no JSON header
  bool dot_moved = false;
  for (int i = 0; i < 20; ++i) {
    const std::string dummy = make_dummy(base::secret(std::string(token)));
    CHECK(dummy.size() == token.size());
    CHECK(drawn_from(dummy, plain));
    dot_moved = dot_moved || dummy[9] != '.' || dummy[19] != '.';
  }
  CHECK(dot_moved);  // both stay in all 20 dummies once in 66^40
}

TEST_CASE("a UUID's dummy is a UUID of the same version and variant", "[brokers][dummy]") {
  const std::string uuid = "6f1c8a2e-93b4-4d7f-a1e5-0c2b9d8e7f61";
  for (int i = 0; i < 50; ++i) {
    const std::string d = make_dummy(base::secret(std::string(uuid)));
    CHECK_THAT(
        d, Catch::Matches("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"));
    CHECK(d != uuid);
  }
}

// ---- dummies derived from a session's seed ------------------------------------------------------

namespace {

std::string hex(const unsigned char* bytes, std::size_t size) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < size; ++i) {
    out.push_back(digits[bytes[i] >> 4]);
    out.push_back(digits[bytes[i] & 15]);
  }
  return out;
}

}  // namespace

TEST_CASE("seeded bytes are HMAC-SHA256 blocks over the label and a counter",
          "[brokers][dummies]") {
  // Computed independently: HMAC-SHA256(seed, "test label" || uint64_be(n)) for n = 0, 1.
  seeded_bytes source(seed_a, "test label");
  std::array<unsigned char, 40> out{};
  source.fill(out.data(), 10);  // in pieces that straddle the block boundary
  source.fill(out.data() + 10, 30);
  CHECK(hex(out.data(), 32) == "73a357919061022de38648cdbf8bd9b7a1550aeb0c6e45d02250965c806f9c32");
  CHECK(hex(out.data() + 32, 8) == "43e3242a049d83d2");

  // Another seed or label: another stream.
  std::array<unsigned char, 32> other_seed{}, other_label{};
  seeded_bytes(seed_b, "test label").fill(other_seed.data(), other_seed.size());
  seeded_bytes(seed_a, "test label 2").fill(other_label.data(), other_label.size());
  CHECK(hex(other_seed.data(), 32) != hex(out.data(), 32));
  CHECK(hex(other_label.data(), 32) != hex(out.data(), 32));
}

TEST_CASE("a seeded dummy keeps the public shape and is the same for the same stream",
          "[brokers][dummies]") {
  for (const family_case& c : family_cases()) {
    INFO("prefix " << c.prefix);
    const std::string real_text = c.prefix + c.body;
    const base::secret real{std::string(real_text)};
    seeded_bytes one(seed_a, "label"), again(seed_a, "label"), other(seed_b, "label");
    const std::string a = make_dummy(real, one);
    CHECK(a == make_dummy(real, again));
    CHECK(a != make_dummy(real, other));
    CHECK(a.size() == real_text.size());
    CHECK(a.starts_with(c.prefix));
    CHECK(drawn_from(a.substr(c.prefix.size()), c.alphabet));
    CHECK(a != real_text);
  }
  // A JWT keeps its header and claims; the signature comes from the stream.
  const std::string jwt =
      "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
      "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";
  seeded_bytes source(seed_a, "jwt");
  const std::string dummy = make_dummy(base::secret(std::string(jwt)), source);
  const std::size_t signature_at = jwt.rfind('.') + 1;
  CHECK(dummy.substr(0, signature_at) == jwt.substr(0, signature_at));
  CHECK(dummy.substr(signature_at) != jwt.substr(signature_at));
  CHECK(drawn_from(dummy.substr(signature_at), base64url));
}

TEST_CASE("a dummy seed derives one dummy per credential and field", "[brokers][dummies]") {
  const std::string token = "ghp_" + cycle(base62, 36);
  const base::secret real{std::string(token)};
  const dummy_seed a(seed_a), a_again(seed_a), b(seed_b);
  const std::string github = a.dummy(real, "github", "value");
  CHECK(github == a_again.dummy(real, "github", "value"));
  CHECK(github != b.dummy(real, "github", "value"));
  CHECK(github != a.dummy(real, "github2", "value"));
  CHECK(github != a.dummy(real, "github", "value2"));
  // The name and field are length-prefixed: moving a byte from one to the other is another label.
  CHECK(a.dummy(real, "ab", "c") != a.dummy(real, "a", "bc"));
  CHECK(github.size() == token.size());
  CHECK(github.starts_with("ghp_"));
  CHECK(drawn_from(github.substr(4), base62));

  CHECK_THROWS_AS(dummy_seed(""), std::invalid_argument);
  CHECK_THROWS_AS(dummy_seed(std::string(dummy_seed::min_size - 1, 'x')), std::invalid_argument);
  CHECK_NOTHROW(dummy_seed(std::string(dummy_seed::min_size, 'x')));
}

TEST_CASE("a new dummy seed is 32 bytes from the CSPRNG", "[brokers][dummies]") {
  const base::secret one = new_dummy_seed(), two = new_dummy_seed();
  CHECK(one.size() == 32);
  CHECK(two.size() == 32);
  CHECK(one.expose() != two.expose());
}

TEST_CASE("a keyed dummy is one user's, stable for one real value, new for another",
          "[brokers][dummies]") {
  const base::secret key_a{std::string(seed_a)}, key_b{std::string(seed_b)};
  const std::string token = "sk-ant-api03-" + cycle(base64url, 93) + "AA";
  const base::secret real{std::string(token)};
  const std::string dummy = keyed_dummy(key_a, real, "anthropic", "value");
  CHECK(dummy != token);
  CHECK(dummy.size() == token.size());
  CHECK(drawn_from(dummy.substr(13), base64url));
  CHECK(dummy.starts_with("sk-ant-api03-"));
  // The same user, credential and real value: the same dummy, session after session.
  CHECK(dummy == keyed_dummy(key_a, base::secret(std::string(token)), "anthropic", "value"));
  // A rotated real key, another user, another credential or field: another dummy.
  std::string rotated = token;
  rotated.back() = rotated.back() == 'A' ? 'B' : 'A';
  CHECK(dummy != keyed_dummy(key_a, base::secret(std::move(rotated)), "anthropic", "value"));
  CHECK(dummy != keyed_dummy(key_b, real, "anthropic", "value"));
  CHECK(dummy != keyed_dummy(key_a, real, "anthropic2", "value"));
  CHECK(dummy != keyed_dummy(key_a, real, "anthropic", "key id"));
  // A session's seed with the same bytes derives other dummies than the user's key.
  CHECK(dummy != dummy_seed(seed_a).dummy(real, "anthropic", "value"));
  CHECK_THROWS_AS(
      keyed_dummy(base::secret(std::string(dummy_seed::min_size - 1, 'k')), real, "a", "v"),
      std::invalid_argument);
}
