#include "brokers/dummy.hpp"

#include <catch2/catch.hpp>

#include <array>
#include <set>
#include <stdexcept>
#include <string>

namespace base = broker::base;

using broker::base::secret;
using broker::brokers::dummy_seed;
using broker::brokers::keyed_dummy;
using broker::brokers::known_prefix;
using broker::brokers::make_dummy;
using broker::brokers::new_dummy_seed;
using broker::brokers::seeded_bytes;

namespace {

char class_of(char c) {
  if (c >= 'A' && c <= 'Z') return 'U';
  if (c >= 'a' && c <= 'z') return 'l';
  if (c >= '0' && c <= '9') return 'd';
  return c;  // punctuation must stay exactly where it is
}

std::string shape(const std::string& s) {
  std::string out;
  for (char c : s) out.push_back(class_of(c));
  return out;
}

// A fake token: the prefix, then a body that mixes every class and some punctuation.
std::string fake_token(const std::string& prefix) {
  return prefix + "aB3dE5gH7jK9mN1pQ2-sT4vW6yZ8_bC0eF.hI2kL4nO6qR8tU0wX";
}

}  // namespace

TEST_CASE("known_prefix picks the longest known prefix", "[brokers][dummy]") {
  CHECK(known_prefix("sk-ant-api03-abc") == "sk-ant-api03-");
  CHECK(known_prefix("sk-ant-admin01-abc") == "sk-ant-admin01-");
  CHECK(known_prefix("sk-ant-other") == "sk-ant-");
  CHECK(known_prefix("sk-proj-abc") == "sk-proj-");
  CHECK(known_prefix("sk-svcacct-abc") == "sk-svcacct-");
  CHECK(known_prefix("sk-admin-abc") == "sk-admin-");
  CHECK(known_prefix("sk-abc") == "sk-");
  CHECK(known_prefix("github_pat_11ABC") == "github_pat_");
  CHECK(known_prefix("ghp_abc") == "ghp_");
  CHECK(known_prefix("AKIAIOSFODNN7EXAMPLE") == "AKIA");
  CHECK(known_prefix("plain-token") == "");
  CHECK(known_prefix("ghp_") == "");  // nothing after it: not a token of that kind
  CHECK(known_prefix("") == "");
}

TEST_CASE("dummies keep prefix, length and character classes", "[brokers][dummy]") {
  const char* prefixes[] = {"github_pat_",
                            "ghp_",
                            "gho_",
                            "ghu_",
                            "ghs_",
                            "ghr_",
                            "sk-proj-",
                            "sk-svcacct-",
                            "sk-admin-",
                            "sk-ant-api03-",
                            "sk-ant-admin01-",
                            "sk-ant-",
                            "sk-",
                            "xoxb-",
                            "xoxp-",
                            "xoxa-",
                            "glpat-",
                            "AKIA",
                            "ASIA",
                            "npm_",
                            "pypi-",
                            "hf_"};
  for (const char* prefix : prefixes) {
    INFO("prefix " << prefix);  // the prefix is public; the fake token is not printed
    const std::string real_text = fake_token(prefix);
    CHECK(known_prefix(real_text) == prefix);
    base::secret real{std::string(real_text)};
    std::string a = make_dummy(real);
    std::string b = make_dummy(real);
    CHECK(a.size() == real_text.size());
    CHECK(a.starts_with(prefix));
    CHECK(shape(a) == shape(real_text));
    CHECK(a != real_text);
    CHECK(a != b);
    // Everything after the prefix is random: with ~45 random positions, a run of equal
    // characters the length of the body is impossible.
    CHECK(a.substr(std::string(prefix).size()) != real_text.substr(std::string(prefix).size()));
  }
}

TEST_CASE("AWS key ids stay upper-case and digits", "[brokers][dummy]") {
  base::secret real{std::string("AKIAIOSFODNN7EXAMPLE")};
  std::string d = make_dummy(real);
  CHECK(d.starts_with("AKIA"));
  CHECK(d.size() == 20);
  for (char c : d) CHECK(((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')));
}

TEST_CASE("dummies are spread over their alphabet", "[brokers][dummy]") {
  // Every position of a 64-character lower-case body over 40 dummies: all 26 letters appear.
  base::secret real{std::string("tok-" + std::string(64, 'q'))};
  std::set<char> seen;
  for (int i = 0; i < 40; ++i)
    for (char c : make_dummy(real).substr(4)) seen.insert(c);
  CHECK(seen.size() == 26);
}

TEST_CASE("dummies of degenerate values still differ", "[brokers][dummy]") {
  base::secret dashes{std::string("--------")};
  std::string d = make_dummy(dashes);
  CHECK(d.size() == 8);
  CHECK(d != "--------");

  base::secret one_digit{std::string("7")};
  for (int i = 0; i < 50; ++i) {
    std::string x = make_dummy(one_digit);
    CHECK(x.size() == 1);
    CHECK(x != "7");
    CHECK((x[0] >= '0' && x[0] <= '9'));
  }

  CHECK_THROWS_AS(make_dummy(base::secret{}), std::invalid_argument);
}

TEST_CASE("a JWT's dummy keeps its header and claims and changes only the signature") {
  // {"alg":"RS256","typ":"JWT"} . {"exp":1900000000,"chatgpt_plan_type":"plus"} . signature
  const std::string head = "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9";
  const std::string claims = "eyJleHAiOjE5MDAwMDAwMDAsImNoYXRncHRfcGxhbl90eXBlIjoicGx1cyJ9";
  const std::string signature = "Qm9ndXNTaWduYXR1cmUtX0FCQ0RFRkdISUpLTE1OT1BRUlNUVVZXWFla";
  const std::string jwt = head + "." + claims + "." + signature;
  const std::string dummy = make_dummy(base::secret(std::string(jwt)));
  REQUIRE(dummy.size() == jwt.size());
  CHECK(dummy.starts_with(head + "." + claims + "."));
  CHECK(dummy.substr(head.size() + claims.size() + 2) != signature);
  CHECK(shape(dummy) == shape(jwt));
}

TEST_CASE("a dotted token that is no JWT is shaped as a whole") {
  const std::string token = "abcDEF123.ghiJKL456.mnoPQR789";  // no JSON header
  const std::string dummy = make_dummy(base::secret(std::string(token)));
  CHECK(dummy.substr(0, 9) != token.substr(0, 9));
  CHECK(shape(dummy) == shape(token));
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

const std::string seed_a = "0123456789abcdef0123456789abcdef";
const std::string seed_b = "fedcba9876543210fedcba9876543210";

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

TEST_CASE("a seeded dummy keeps the shape and is the same for the same stream",
          "[brokers][dummies]") {
  for (const char* prefix : {"ghp_", "github_pat_", "sk-proj-", "sk-ant-api03-", "AKIA", "xoxb-"}) {
    INFO("prefix " << prefix);
    const std::string real_text = fake_token(prefix);
    const base::secret real{std::string(real_text)};
    seeded_bytes one(seed_a, "label"), again(seed_a, "label"), other(seed_b, "label");
    const std::string a = make_dummy(real, one);
    CHECK(a == make_dummy(real, again));
    CHECK(a != make_dummy(real, other));
    CHECK(a.starts_with(prefix));
    CHECK(shape(a) == shape(real_text));
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
  CHECK(shape(dummy) == shape(jwt));
}

TEST_CASE("a dummy seed derives one dummy per credential and field", "[brokers][dummies]") {
  const base::secret real{fake_token("ghp_")};
  const dummy_seed a(seed_a), a_again(seed_a), b(seed_b);
  const std::string github = a.dummy(real, "github", "value");
  CHECK(github == a_again.dummy(real, "github", "value"));
  CHECK(github != b.dummy(real, "github", "value"));
  CHECK(github != a.dummy(real, "github2", "value"));
  CHECK(github != a.dummy(real, "github", "value2"));
  // The name and field are length-prefixed: moving a byte from one to the other is another label.
  CHECK(a.dummy(real, "ab", "c") != a.dummy(real, "a", "bc"));
  CHECK(shape(github) == shape(fake_token("ghp_")));

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
  const std::string token = fake_token("sk-ant-api03-");
  const base::secret real{std::string(token)};
  const std::string dummy = keyed_dummy(key_a, real, "anthropic", "value");
  CHECK(dummy != token);
  CHECK(shape(dummy) == shape(token));
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
