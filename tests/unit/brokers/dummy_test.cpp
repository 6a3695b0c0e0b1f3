#include "brokers/dummy.hpp"

#include <catch2/catch.hpp>

#include <set>
#include <stdexcept>
#include <string>

using broker::brokers::known_prefix;
using broker::brokers::make_dummy;
using broker::brokers::secret;

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
    secret real{std::string(real_text)};
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
  secret real{std::string("AKIAIOSFODNN7EXAMPLE")};
  std::string d = make_dummy(real);
  CHECK(d.starts_with("AKIA"));
  CHECK(d.size() == 20);
  for (char c : d) CHECK(((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')));
}

TEST_CASE("dummies are spread over their alphabet", "[brokers][dummy]") {
  // Every position of a 64-character lower-case body over 40 dummies: all 26 letters appear.
  secret real{std::string("tok-" + std::string(64, 'q'))};
  std::set<char> seen;
  for (int i = 0; i < 40; ++i)
    for (char c : make_dummy(real).substr(4)) seen.insert(c);
  CHECK(seen.size() == 26);
}

TEST_CASE("dummies of degenerate values still differ", "[brokers][dummy]") {
  secret dashes{std::string("--------")};
  std::string d = make_dummy(dashes);
  CHECK(d.size() == 8);
  CHECK(d != "--------");

  secret one_digit{std::string("7")};
  for (int i = 0; i < 50; ++i) {
    std::string x = make_dummy(one_digit);
    CHECK(x.size() == 1);
    CHECK(x != "7");
    CHECK((x[0] >= '0' && x[0] <= '9'));
  }

  CHECK_THROWS_AS(make_dummy(secret{}), std::invalid_argument);
}

TEST_CASE("a JWT's dummy keeps its header and claims and changes only the signature") {
  // {"alg":"RS256","typ":"JWT"} . {"exp":1900000000,"chatgpt_plan_type":"plus"} . signature
  const std::string head = "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9";
  const std::string claims = "eyJleHAiOjE5MDAwMDAwMDAsImNoYXRncHRfcGxhbl90eXBlIjoicGx1cyJ9";
  const std::string signature = "Qm9ndXNTaWduYXR1cmUtX0FCQ0RFRkdISUpLTE1OT1BRUlNUVVZXWFla";
  const std::string jwt = head + "." + claims + "." + signature;
  const std::string dummy = make_dummy(secret(std::string(jwt)));
  REQUIRE(dummy.size() == jwt.size());
  CHECK(dummy.starts_with(head + "." + claims + "."));
  CHECK(dummy.substr(head.size() + claims.size() + 2) != signature);
  CHECK(shape(dummy) == shape(jwt));
}

TEST_CASE("a dotted token that is no JWT is shaped as a whole") {
  const std::string token = "abcDEF123.ghiJKL456.mnoPQR789";  // no JSON header
  const std::string dummy = make_dummy(secret(std::string(token)));
  CHECK(dummy.substr(0, 9) != token.substr(0, 9));
  CHECK(shape(dummy) == shape(token));
}
