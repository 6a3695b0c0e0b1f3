// The canary and the real-value block (docs/policy.md) against a child that encodes what it sends:
// base64 (both RFC 4648 alphabets, padded or not, at any alignment inside a longer blob),
// percent-encoding (RFC 3986 §2.1, either hex case) and values split across repeated header
// fields (RFC 9110 §5.3), in the target, the headers and streamed bodies.
#include <catch2/catch.hpp>

#include <cctype>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "base/text.hpp"
#include "brokers/credential_set.hpp"
#include "config/host_pattern.hpp"
#include "value_broker_test_support.hpp"

namespace base = broker::base;

using broker::base::base64_alphabet;
using broker::base::base64_fragment;
using broker::base::percent_escape;
using broker::base::secret;
using broker::brokers::body_scan;
using broker::brokers::credential_set;
using broker::brokers::request_action;
using broker::brokers::request_context;
using broker::brokers::request_decision;
using broker::brokers::stream_scrubber;
using broker::brokers::value_broker;
using broker::brokers::testing::brokers_of;
using broker::brokers::testing::value_init;
using broker::http::header_field;

namespace {

// Fake values; each dummy has its real's length. The AWS-shaped pair has '/' and '+', which a
// form encoder escapes.
const std::string gh_real = "ghp_REALreal9876543210realREALreal98765";
const std::string gh_dummy = "ghp_DUMMYdummy0123456789dummyDUMMY01234";
const std::string ai_real = "sk-proj-REALreal9876543210realREALreal9";
const std::string ai_dummy = "sk-proj-DUMMYdummy0123456789dummyDUMMY0";
const std::string aws_real = "wJalrXUtnFEMI/K7MDENG/bPxRfiCY+REALKEY1";
const std::string aws_dummy = "Qx9b2LmNo/Pq7RsTuV/wXyZa1bCdE+DUMMYKEY2";

value_broker::init make(std::string name, std::string type, std::vector<std::string> hosts,
                        const std::string& real, const std::string& dummy) {
  value_broker::init c = value_init(std::move(name), std::move(type), hosts, real, dummy);
  if (c.spec.type == "header") c.spec.header = "x-api-key";
  return c;
}

credential_set make_set() {
  std::vector<value_broker::init> list;
  list.push_back(make("github", "github", {"api.github.com"}, gh_real, gh_dummy));
  list.push_back(make("openai", "bearer", {"api.openai.com"}, ai_real, ai_dummy));
  list.push_back(make("keyed", "header", {"api.keyed.example"}, aws_real, aws_dummy));
  return credential_set(brokers_of(std::move(list)));
}

request_context to(std::string_view host) {
  return request_context{host, false, false};
}

// A reference base64 encoder (RFC 4648 §4, §5), independent of the broker's.
std::string b64(std::string_view data, bool url = false, bool pad = true) {
  const char* digits = url ? "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
                           : "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (std::size_t i = 0; i < data.size(); i += 3) {
    unsigned v = 0;
    const std::size_t n = std::min<std::size_t>(3, data.size() - i);
    for (std::size_t k = 0; k < 3; ++k)
      v = v << 8 | (k < n ? static_cast<unsigned char>(data[i + k]) : 0u);
    for (std::size_t k = 0; k < 4; ++k) {
      if (k <= n)
        out.push_back(digits[v >> (18 - 6 * k) & 63]);
      else if (pad)
        out.push_back('=');
    }
  }
  return out;
}

std::string pct_all(std::string_view text, bool lower) {
  const char* hex = lower ? "0123456789abcdef" : "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) out += {'%', hex[c >> 4], hex[c & 15]};
  return out;
}

// Mixed hex case, byte by byte: no fixed pattern has it, a decoder reads it.
std::string pct_mixed(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    std::string one = pct_all(text.substr(i, 1), i % 2 == 1);
    out += one;
  }
  return out;
}

// A form encoder's output: unreserved characters kept, the rest %XX.
std::string pct_form(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_' || c == '~')
      out.push_back(c);
    else
      out += pct_all(std::string_view(&c, 1), false);
  }
  return out;
}

struct request {
  std::string target = "/v1/things";
  std::vector<header_field> headers{{"Host", "collector.example"}, {"Accept", "*/*"}};
};

request_decision apply(const credential_set& set, std::string_view host, request& r) {
  const request before = r;
  auto d = set.apply(to(host), r.target, r.headers);
  if (d.action != request_action::pass) {  // a refusal modifies nothing
    CHECK(r.target == before.target);
    REQUIRE(r.headers.size() == before.headers.size());
    for (std::size_t i = 0; i < r.headers.size(); ++i)
      CHECK(r.headers[i].value == before.headers[i].value);
  }
  return d;
}

// Each way of base64-encoding `value` inside a longer blob: every alignment (0 to 5 bytes
// before it), something after it or not, both alphabets, padded or not.
std::vector<std::string> base64_carriers(const std::string& value) {
  std::vector<std::string> out;
  const std::string before = "token=", after = "&x=1";
  for (std::size_t lead = 0; lead <= 5; ++lead) {
    for (std::size_t trail : {std::size_t{0}, std::size_t{1}, std::size_t{2}, after.size()}) {
      const std::string data =
          before.substr(0, lead) + value + after.substr(0, std::min(trail, after.size()));
      for (bool url : {false, true})
        for (bool pad : {true, false}) out.push_back(b64(data, url, pad));
    }
  }
  return out;
}

}  // namespace

// ---- the encodings themselves ------------------------------------------------------------------

TEST_CASE("base64_fragment is in every base64 text carrying the value at that alignment",
          "[brokers][text][canary]") {
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    std::string value(8 + rng() % 40, '\0');
    for (char& c : value) c = static_cast<char>(rng());
    for (std::size_t lead = 0; lead < 9; ++lead) {
      std::string data(lead, '\0');
      for (char& c : data) c = static_cast<char>(rng());
      data += value;
      for (std::size_t trail = rng() % 4; trail > 0; --trail)
        data.push_back(static_cast<char>(rng()));
      for (bool url : {false, true}) {
        const std::string fragment = base::base64_fragment(
            value, lead % 3, url ? base::base64_alphabet::url : base::base64_alphabet::standard);
        INFO("round " << round << " lead " << lead << " url " << url);
        CHECK(fragment.size() >= (8 * value.size() - 16) / 6);
        CHECK(b64(data, url, true).find(fragment) != std::string::npos);
        CHECK(b64(data, url, false).find(fragment) != std::string::npos);
      }
    }
  }
  CHECK(base::base64_fragment("a", 1, base::base64_alphabet::standard)
            .empty());  // decides no character
  // Aligned and whole groups: the fragment is the plain encoding.
  CHECK(base::base64_fragment("abcdef", 0, base::base64_alphabet::standard) == b64("abcdef"));
}

TEST_CASE("percent_escape escapes every byte or all but unreserved ones, in either case",
          "[brokers][text][canary]") {
  CHECK(base::percent_escape("a/b~", false, false) == "%61%2F%62%7E");
  CHECK(base::percent_escape("a/b~", false, true) == "%61%2f%62%7e");
  CHECK(base::percent_escape("a/b~+", true, false) == "a%2Fb~%2B");
  CHECK(base::percent_escape("a/b~+", true, true) == "a%2fb~%2b");
}

// ---- request heads ----------------------------------------------------------------------------

TEST_CASE("canary: a base64-encoded dummy is refused in headers, at any alignment",
          "[brokers][apply][canary]") {
  const auto set = make_set();
  for (const std::string& blob : base64_carriers(gh_dummy)) {
    INFO(blob);
    request r;
    r.headers.push_back({"X-Data", blob});
    auto d = apply(set, "collector.example", r);
    CHECK(d.action == request_action::credential_not_bound);
    CHECK(d.credential == "github");
    CHECK(d.where == "header x-data, base64-encoded");

    request bearer;  // as a client would send a token it was told is base64
    bearer.headers.push_back({"Authorization", "Bearer " + blob});
    CHECK(apply(set, "collector.example", bearer).where == "header authorization, base64-encoded");
  }
}

TEST_CASE("canary: a base64-encoded dummy is refused in the path and the query",
          "[brokers][apply][canary]") {
  const auto set = make_set();
  for (const std::string& blob : base64_carriers(ai_dummy)) {
    INFO(blob);
    request in_query;
    in_query.target = "/collect?d=" + blob + "&v=2";
    auto d = apply(set, "collector.example", in_query);
    CHECK(d.action == request_action::credential_not_bound);
    CHECK(d.credential == "openai");
    CHECK(d.where == "query, base64-encoded");

    // The query as an encoder escapes it ('+', '/' and '=' as %XX): found after decoding.
    request escaped;
    escaped.target = "/collect?d=" + pct_form(blob);
    CHECK(apply(set, "collector.example", escaped).where == "query, base64-encoded");

    request in_path;
    in_path.target = "/paste/" + blob;
    d = apply(set, "collector.example", in_path);
    CHECK(d.action == request_action::credential_not_bound);
    CHECK(d.where == "path, base64-encoded");
  }
}

TEST_CASE("canary: a percent-encoded dummy is refused in header values and names",
          "[brokers][apply][canary]") {
  const auto set = make_set();
  const std::vector<std::string> encodings{pct_all(gh_dummy, false), pct_all(gh_dummy, true),
                                           pct_mixed(gh_dummy),
                                           "ghp_%44UMMY" + gh_dummy.substr(9)};  // just one byte
  for (const std::string& encoded : encodings) {
    INFO(encoded);
    request r;
    r.headers.push_back({"X-Data", "v=" + encoded + ";"});
    auto d = apply(set, "collector.example", r);
    CHECK(d.action == request_action::credential_not_bound);
    CHECK(d.credential == "github");
    CHECK(d.where == "header x-data, percent-encoded");

    request in_name;  // '%' is a tchar: a field name may carry it too (RFC 9110 §5.6.2)
    in_name.headers.push_back({"X-" + encoded, "1"});
    CHECK(apply(set, "collector.example", in_name).where == "header name, percent-encoded");

    request in_query;
    in_query.target = "/c?q=" + encoded;
    CHECK(apply(set, "collector.example", in_query).where == "query");
  }
  // Percent-encoded base64, in a header: decoded, then the fragment is found.
  request both;
  both.headers.push_back({"Cookie", "s=" + pct_all(b64("x" + aws_dummy), false)});
  auto d = apply(set, "collector.example", both);
  CHECK(d.action == request_action::credential_not_bound);
  CHECK(d.credential == "keyed");
  CHECK(d.where == "header cookie, base64-encoded, percent-encoded");
}

TEST_CASE("canary: a dummy split across repeated header fields is refused",
          "[brokers][apply][canary]") {
  const auto set = make_set();
  for (std::size_t cut = 1; cut < gh_dummy.size(); ++cut) {
    INFO("cut at " << cut);
    const std::string first = gh_dummy.substr(0, cut), second = gh_dummy.substr(cut);
    request r;
    r.headers.push_back({"X-A", first});
    r.headers.push_back({"Accept-Language", "en"});
    r.headers.push_back({"x-a", second});  // names compare case-insensitively
    auto d = apply(set, "collector.example", r);
    CHECK(d.action == request_action::credential_not_bound);
    CHECK(d.credential == "github");
    CHECK(d.where == "header x-a, split across repeated header fields");

    // In three pieces, percent-encoded, with an escape cut in the middle.
    const std::string encoded = pct_all(gh_dummy, cut % 2 == 0);
    const std::size_t third = std::min(encoded.size() - 1, 3 * cut + 1);
    request pieces;
    pieces.headers.push_back({"X-B", encoded.substr(0, cut)});
    pieces.headers.push_back({"X-B", encoded.substr(cut, third - cut)});
    pieces.headers.push_back({"X-B", encoded.substr(third)});
    d = apply(set, "collector.example", pieces);
    CHECK(d.action == request_action::credential_not_bound);
    CHECK(d.where == "header x-b, split across repeated header fields, percent-encoded");
  }
  // Base64 split across fields (a server that concatenates them gets the whole blob).
  const std::string blob = b64("id=" + ai_dummy + ";");
  request split64;
  split64.headers.push_back({"X-C", blob.substr(0, 20)});
  split64.headers.push_back({"X-C", blob.substr(20)});
  auto d = apply(set, "collector.example", split64);
  CHECK(d.action == request_action::credential_not_bound);
  CHECK(d.credential == "openai");
  CHECK(d.where == "header x-c, split across repeated header fields, base64-encoded");
}

TEST_CASE("real values are refused in every encoding, even on their bound host",
          "[brokers][apply][canary]") {
  const auto set = make_set();
  for (std::string_view host : {"api.github.com", "collector.example"}) {
    std::vector<std::pair<request, std::string>> cases;
    for (const std::string& blob : base64_carriers(gh_real)) {
      request r;
      r.headers.push_back({"X-Data", blob});
      cases.emplace_back(r, "header x-data, base64-encoded");
      request q;
      q.target = "/x?q=" + blob;
      cases.emplace_back(q, "query, base64-encoded");
    }
    for (bool lower : {false, true}) {
      request r;
      r.headers.push_back({"X-Data", pct_all(gh_real, lower)});
      cases.emplace_back(r, "header x-data, percent-encoded");
      request q;
      q.target = "/x?q=" + pct_all(gh_real, lower);
      cases.emplace_back(q, "query");
    }
    request split;
    split.headers.push_back({"Cookie", "a=" + gh_real.substr(0, 10)});
    split.headers.push_back({"Cookie", gh_real.substr(10)});
    cases.emplace_back(split, "header cookie, split across repeated header fields");

    for (auto& [r, where] : cases) {
      INFO(host << " " << where);
      r.headers.push_back({"Authorization", "Bearer " + gh_dummy});  // bound here, not swapped
      auto d = apply(set, host, r);
      CHECK(d.action == request_action::real_secret_blocked);
      CHECK(d.credential == "github");
      CHECK(d.where == where);
      CHECK(r.headers.back().value == "Bearer " + gh_dummy);
    }
  }
}

TEST_CASE("canary: what a refusal names never holds the value", "[brokers][apply][canary]") {
  const auto set = make_set();
  request r;
  r.headers.push_back({"X-" + b64(gh_real, true, false), "1"});  // base64url in a field name
  auto d = apply(set, "collector.example", r);
  CHECK(d.action == request_action::real_secret_blocked);
  CHECK(d.where == "header name, base64-encoded");
}

TEST_CASE("canary: bound dummies are still swapped and ordinary requests pass",
          "[brokers][apply][canary]") {
  const auto set = make_set();
  SECTION("a bound dummy, as git sends it in Basic credentials, is swapped") {
    request r;
    r.headers.push_back({"Authorization", "Basic " + b64("x-access-token:" + gh_dummy)});
    auto d = apply(set, "api.github.com", r);
    CHECK(d.action == request_action::pass);
    CHECK(d.swapped == 1);
    CHECK(r.headers.back().value == "Basic " + b64("x-access-token:" + gh_real));
  }
  SECTION("a bound dummy base64-encoded or percent-encoded elsewhere is no canary") {
    request r;
    r.headers.push_back({"X-Data", b64("token=" + gh_dummy)});
    r.headers.push_back({"X-Pct", pct_all(gh_dummy, false)});
    r.headers.push_back({"X-Split", gh_dummy.substr(0, 9)});
    r.headers.push_back({"X-Split", gh_dummy.substr(9)});
    auto d = apply(set, "api.github.com", r);
    CHECK(d.action == request_action::pass);
    CHECK(d.swapped == 0);
  }
  SECTION("another credential's base64-encoded dummy is refused on a bound host") {
    request r;
    r.headers.push_back({"Authorization", "Bearer " + gh_dummy});
    r.headers.push_back({"X-Data", b64(ai_dummy, true)});
    auto d = apply(set, "api.github.com", r);
    CHECK(d.action == request_action::credential_not_bound);
    CHECK(d.credential == "openai");
  }
  SECTION("ordinary requests: base64, percent-encoding and repeated fields without a value") {
    std::mt19937 rng(11);
    for (int round = 0; round < 300; ++round) {
      std::string random(10 + rng() % 200, '\0');
      for (char& c : random) c = static_cast<char>(rng());
      request r;
      r.target = "/search?q=" + pct_all(random, round % 2 == 1) + "&sig=" + b64(random, true);
      r.headers.push_back({"X-Blob", b64(random)});
      r.headers.push_back({"X-Escaped", pct_mixed(random)});
      r.headers.push_back({"Accept", "text/html"});
      r.headers.push_back({"Accept", "application/json"});
      r.headers.push_back({"Cookie", "a=" + b64(random.substr(0, 5))});
      r.headers.push_back({"Cookie", "b=%41%42"});
      for (std::string_view host : {"collector.example", "api.github.com"}) {
        auto d = apply(set, host, r);
        CHECK(d.action == request_action::pass);
      }
    }
  }
  SECTION("a blob carrying a value that differs from a dummy in one byte passes") {
    for (std::size_t at = 0; at < gh_dummy.size(); at += 5) {
      std::string near = gh_dummy;
      near[at] = near[at] == 'x' ? 'y' : 'x';
      request r;
      r.headers.push_back({"X-Data", b64("t=" + near)});
      r.headers.push_back({"X-Pct", pct_all(near, false)});
      r.headers.push_back({"X-A", near.substr(0, 7)});
      r.headers.push_back({"X-A", near.substr(7)});
      CHECK(apply(set, "collector.example", r).action == request_action::pass);
    }
  }
}

// ---- request bodies ---------------------------------------------------------------------------

namespace {

struct body_result {
  request_decision decision;
  std::size_t released = 0;  // bytes let out before the match was reported
};

// Drives a scrubber with the scan's patterns over `body` cut at `cut`, as the relay does: a
// reported match stops the body, and what the matching call released never leaves.
body_result scan_body(const body_scan& scan, const std::string& body, std::size_t cut) {
  stream_scrubber s(scan.patterns());
  std::string out, piece;
  body_result r;
  std::optional<std::size_t> m = s.feed(std::string_view(body).substr(0, cut), piece);
  if (!m) {
    out += piece;
    piece.clear();
    m = s.feed(std::string_view(body).substr(cut), piece);
  }
  if (!m) {
    out += piece;
    piece.clear();
    m = s.finish(piece);
  }
  if (!m) {
    out += piece;
    CHECK(out == body);  // patterns replace with themselves: a passing body is unchanged
  }
  r.released = out.size();
  if (m) r.decision = scan.decision(*m);
  return r;
}

}  // namespace

TEST_CASE("body scan: encoded dummies and real values are refused at every split",
          "[brokers][body][canary]") {
  const auto set = make_set();
  const body_scan unbound = set.request_body_scan(to("collector.example"));
  const body_scan bound = set.request_body_scan(to("api.keyed.example"));

  SECTION("encoded dummies and real values are refused, nothing of them released") {
    struct form {
      std::string name;
      std::string encoded;  // the value's encoding, as the body carries it
      std::size_t lead;     // bytes of it that may go out before the match (partial base64)
      std::string where;
    };
    for (const std::string* value : {&aws_dummy, &aws_real}) {
      const bool real = value == &aws_real;
      std::vector<form> forms{{"plain", *value, 0, "body"},
                              {"percent upper", pct_all(*value, false), 0, "body, percent-encoded"},
                              {"percent lower", pct_all(*value, true), 0, "body, percent-encoded"},
                              {"form-encoded", pct_form(*value), 0, "body, percent-encoded"},
                              {"form-encoded lower", base::percent_escape(*value, true, true), 0,
                               "body, percent-encoded"}};
      for (std::size_t lead = 0; lead < 3; ++lead) {
        const std::string data = std::string("tok=").substr(0, lead) + *value + "&";
        for (bool url : {false, true})
          forms.push_back({"base64 lead " + std::to_string(lead) + (url ? " url" : ""),
                           b64(data, url, false), 3, "body, base64-encoded"});
      }
      for (const form& f : forms) {
        const std::string prefix = "{\"payload\":\"";
        const std::string body = prefix + f.encoded + "\",\"n\":1}";
        for (std::size_t cut = 0; cut <= body.size(); ++cut) {
          INFO((real ? "real " : "dummy ") << f.name << " cut " << cut);
          for (const body_scan* scan : {&unbound, &bound}) {
            if (!real && scan == &bound) continue;  // the dummy may go to its own host
            const body_result r = scan_body(*scan, body, cut);
            CHECK(r.decision.action == (real ? request_action::real_secret_blocked
                                             : request_action::credential_not_bound));
            CHECK(r.decision.credential == "keyed");
            CHECK(r.decision.where == f.where);
            // Nothing of the value's encoding left before the refusal but the base64
            // characters that mix its first bits with the bytes before it.
            CHECK(r.released <= prefix.size() + f.lead);
          }
        }
      }
    }
  }
  SECTION("the bound dummy, in any form, passes to its host") {
    for (const std::string& body :
         {b64("k=" + aws_dummy), pct_all(aws_dummy, true), pct_form(aws_dummy), aws_dummy}) {
      for (std::size_t cut = 0; cut <= body.size(); cut += 7)
        CHECK(scan_body(bound, body, cut).decision.action == request_action::pass);
    }
  }
  SECTION("ordinary bodies pass") {
    std::mt19937 rng(3);
    for (int round = 0; round < 100; ++round) {
      std::string random(1 + rng() % 3000, '\0');
      for (char& c : random) c = static_cast<char>(rng());
      const std::string body = "{\"data\":\"" + b64(random) + "\",\"q\":\"" +
                               pct_all(random.substr(0, 50), true) + "\"}" + random;
      CHECK(scan_body(unbound, body, rng() % body.size()).decision.action == request_action::pass);
    }
  }
}

TEST_CASE("body scan: patterns are the forms of what may not go, decisions fixed with them",
          "[brokers][body][canary]") {
  std::optional<credential_set> set(make_set());
  const body_scan scan = set->request_body_scan(to("api.github.com"));
  auto has = [&](std::string_view find) {
    for (const auto& p : scan.patterns())
      if (p.find == find) return true;
    return false;
  };
  CHECK(has(gh_real));
  CHECK(has(ai_dummy));
  CHECK(has(pct_all(ai_dummy, true)));
  CHECK(has(base::base64_fragment(gh_real, 1, base::base64_alphabet::url)));
  CHECK_FALSE(has(gh_dummy));  // bound here
  CHECK_FALSE(has(pct_all(gh_dummy, false)));
  for (const auto& p : scan.patterns()) CHECK(p.find == p.replacement);
  CHECK(scan.decision(scan.patterns().size()).action == request_action::pass);

  // The scan owns its patterns and decisions: it outlives the set it came from.
  set.reset();
  const body_result r = scan_body(scan, "x=" + b64("x" + ai_dummy), 5);
  CHECK(r.decision.action == request_action::credential_not_bound);
  CHECK(r.decision.credential == "openai");
  CHECK(r.decision.where == "body, base64-encoded");
}
