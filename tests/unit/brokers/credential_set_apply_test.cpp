#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "base/text.hpp"
#include "brokers/credential_set.hpp"
#include "config/host_pattern.hpp"
#include "tests/unit/config/program_files.hpp"
#include "value_broker_test_support.hpp"

namespace base = broker::base;

using broker::base::base64_encode;
using broker::base::secret;
using broker::brokers::credential_set;
using broker::brokers::request_action;
using broker::brokers::request_context;
using broker::brokers::stream_scrubber;
using broker::brokers::value_broker;
using broker::brokers::testing::brokers_of;
using broker::brokers::testing::value_init;
using broker::http::header_field;

namespace {

// Fake values; each dummy has its real's length.
const std::string gh_real = "ghp_REALreal9876543210realREALreal98765";
const std::string gh_dummy = "ghp_DUMMYdummy0123456789dummyDUMMY01234";
const std::string ai_real = "sk-proj-REALreal9876543210realREALreal9";
const std::string ai_dummy = "sk-proj-DUMMYdummy0123456789dummyDUMMY0";

value_broker::init make(std::string name, std::string type, std::vector<std::string> hosts,
                        const std::string& real, const std::string& dummy) {
  value_broker::init c = value_init(std::move(name), std::move(type), hosts, real, dummy);
  c.spec.query = {"access_token"};
  return c;
}

credential_set make_set(bool github_allows_plaintext = false) {
  std::vector<value_broker::init> list;
  list.push_back(make("github", "github", {"api.github.com", "github.com"}, gh_real, gh_dummy));
  list.back().spec.allow_plaintext = github_allows_plaintext;
  list.push_back(make("openai", "bearer", {"api.openai.com"}, ai_real, ai_dummy));
  return credential_set(brokers_of(std::move(list)));
}

struct request {
  std::string target = "/repos/o/r";
  std::vector<header_field> headers{{"Host", "api.github.com"}, {"Accept", "*/*"}};
};

request_context to(std::string_view host) {
  return request_context{host, false, false};
}

std::string basic(const std::string& user_pass) {
  return "Basic " + base::base64_encode(user_pass);
}

}  // namespace

TEST_CASE("apply swaps a bound dummy", "[brokers][apply]") {
  auto set = make_set();
  request r;
  r.headers.push_back({"Authorization", "Bearer " + gh_dummy});
  auto d = set.apply(to("api.github.com"), r.target, r.headers);
  CHECK(d.action == request_action::pass);
  CHECK(d.credential == "github");
  CHECK(d.where == "header authorization");
  CHECK(d.swapped == 1);
  CHECK(r.headers[2].value == "Bearer " + gh_real);
  CHECK(r.headers[0].value == "api.github.com");
}

TEST_CASE("plan: an echo of the swapped head comes back in the client's form", "[brokers][apply]") {
  // The response stage knows each value the swaps rewrote: a Basic credential (whose base64
  // no real-value pattern matches) and the query are shown to the client as it sent them.
  auto set = make_set();
  request r;
  r.target = "/repos/o/r?access_token=" + gh_dummy;
  r.headers.push_back({"Authorization", basic("x-access-token:" + gh_dummy)});
  const request sent = r;
  auto plan = set.plan(to("api.github.com"), "GET", r.target, r.headers, false);
  REQUIRE_FALSE(plan.decision().refused());
  CHECK(plan.holds_real());
  CHECK(plan.decision().swapped == 2);
  REQUIRE(r.headers[2].value == basic("x-access-token:" + gh_real));

  const std::string echo = "{\"url\": \"" + r.target + "\", \"authorization\": \"" +
                           r.headers[2].value + "\", \"token\": \"" + gh_real + "\"}";
  stream_scrubber scrubber(plan.response_patterns());
  std::string out;
  scrubber.feed(echo, out);
  scrubber.finish(out);
  CHECK(out == "{\"url\": \"" + sent.target + "\", \"authorization\": \"" + sent.headers[2].value +
                   "\", \"token\": \"" + gh_dummy + "\"}");
}

TEST_CASE("apply swaps every Authorization header and opted-in query", "[brokers][apply]") {
  auto set = make_set();
  request r;
  r.target = "/x?access_token=" + gh_dummy + "&other=" + gh_dummy;
  r.headers.push_back({"aUtHoRiZaTiOn", "TOKEN " + gh_dummy});
  r.headers.push_back({"Authorization", basic("x-access-token:" + gh_dummy)});
  auto d = set.apply(to("github.com"), r.target, r.headers);
  CHECK(d.action == request_action::pass);
  CHECK(d.swapped == 3);
  CHECK(r.headers[2].value == "TOKEN " + gh_real);
  CHECK(r.headers[3].value == basic("x-access-token:" + gh_real));
  CHECK(r.target == "/x?access_token=" + gh_real + "&other=" + gh_dummy);
}

TEST_CASE("apply passes untouched requests", "[brokers][apply]") {
  auto set = make_set();
  request r;
  auto d = set.apply(to("example.org"), r.target, r.headers);
  CHECK(d.action == request_action::pass);
  CHECK(d.swapped == 0);
  CHECK(d.credential.empty());

  credential_set none;
  r.headers.push_back({"Authorization", "Bearer " + gh_real});
  CHECK(none.apply(to("example.org"), r.target, r.headers).action == request_action::pass);
}

TEST_CASE("apply refuses a dummy sent to a host it is not bound to", "[brokers][apply]") {
  auto set = make_set();
  struct place {
    std::string target;
    header_field header;
    std::string where;
  };
  std::vector<place> places{
      {"/", {"Authorization", "Bearer " + gh_dummy}, "header authorization"},
      {"/", {"X-Anything", "prefix" + gh_dummy + "suffix"}, "header x-anything"},
      {"/", {"Authorization", basic("x-access-token:" + gh_dummy)}, "header authorization"},
      {"/?q=" + gh_dummy, {"Accept", "*/*"}, "query"},
      {"/?q=%67hp_" + gh_dummy.substr(4), {"Accept", "*/*"}, "query"},  // %67 = 'g'
      {"/paste/" + gh_dummy, {"Accept", "*/*"}, "path"},
  };
  for (const place& p : places) {
    INFO("where " << p.where);
    request r;
    r.target = p.target;
    r.headers.push_back(p.header);
    r.headers.push_back({"X-Other", "Bearer " + ai_dummy});  // openai is bound... elsewhere
    const request before = r;
    auto d = set.apply(to("evil.example"), r.target, r.headers);
    CHECK(d.action == request_action::credential_not_bound);
    CHECK(d.credential == "github");
    CHECK(d.where == p.where);
    CHECK(d.swapped == 0);
    CHECK(r.target == before.target);
    for (std::size_t i = 0; i < r.headers.size(); ++i)
      CHECK(r.headers[i].value == before.headers[i].value);
  }
}

TEST_CASE("apply refuses a bound dummy when another one is not bound, changing nothing",
          "[brokers][apply]") {
  auto set = make_set();
  request r;
  r.headers.push_back({"Authorization", "Bearer " + gh_dummy});
  r.headers.push_back({"X-Extra", ai_dummy});
  auto d = set.apply(to("api.github.com"), r.target, r.headers);
  CHECK(d.action == request_action::credential_not_bound);
  CHECK(d.credential == "openai");
  CHECK(d.where == "header x-extra");
  CHECK(r.headers[2].value == "Bearer " + gh_dummy);
}

TEST_CASE("apply refuses real values anywhere, even on bound hosts", "[brokers][apply]") {
  auto set = make_set();
  struct place {
    std::string target;
    header_field header;
    std::string where;
  };
  std::vector<place> places{
      {"/", {"Authorization", "Bearer " + gh_real}, "header authorization"},
      {"/", {"Cookie", "t=" + gh_real}, "header cookie"},
      {"/", {"Authorization", basic("x-access-token:" + gh_real)}, "header authorization"},
      {"/", {"Authorization", basic(gh_real + ":x-oauth-basic")}, "header authorization"},
      {"/?access_token=" + gh_real, {"Accept", "*/*"}, "query"},
      {"/a%62c/" + gh_real, {"Accept", "*/*"}, "path"},
  };
  for (std::string_view host : {"api.github.com", "elsewhere.example"}) {
    for (const place& p : places) {
      INFO("where " << p.where << " host " << host);
      request r;
      r.target = p.target;
      r.headers.push_back(p.header);
      r.headers.push_back({"Authorization", "Bearer " + gh_dummy});
      const request before = r;
      auto d = set.apply(to(host), r.target, r.headers);
      CHECK(d.action == request_action::real_secret_blocked);
      CHECK(d.credential == "github");
      CHECK(d.where == p.where);
      CHECK(r.target == before.target);
      CHECK(r.headers.back().value == "Bearer " + gh_dummy);  // nothing swapped on refusal
    }
  }
}

TEST_CASE("apply: plaintext only to loopback or with allow_plaintext", "[brokers][apply]") {
  auto set = make_set();
  request r;
  r.headers.push_back({"Authorization", "Bearer " + gh_dummy});
  auto plain = set.apply(request_context{"api.github.com", true, false}, r.target, r.headers);
  CHECK(plain.action == request_action::credential_not_bound);
  CHECK(plain.credential == "github");
  CHECK(r.headers[2].value == "Bearer " + gh_dummy);

  auto loop = set.apply(request_context{"api.github.com", true, true}, r.target, r.headers);
  CHECK(loop.action == request_action::pass);
  CHECK(loop.swapped == 1);
  CHECK(r.headers[2].value == "Bearer " + gh_real);

  auto allowed = make_set(true);
  request q;
  q.headers.push_back({"Authorization", "Bearer " + gh_dummy});
  auto d = allowed.apply(request_context{"api.github.com", true, false}, q.target, q.headers);
  CHECK(d.action == request_action::pass);
  CHECK(q.headers[2].value == "Bearer " + gh_real);
}

TEST_CASE("request body scan: real values and refused dummies", "[brokers][apply]") {
  auto set = make_set();
  const auto where = to("api.github.com");
  const auto checks = set.request_body_scan(where);
  auto has = [&](std::string_view find) {
    for (const auto& p : checks.patterns())
      if (p.find == find) return true;
    return false;
  };
  CHECK(has(gh_real));
  CHECK(has(ai_real));
  CHECK(has(ai_dummy));        // not bound here
  CHECK_FALSE(has(gh_dummy));  // bound here
  for (const auto& p : checks.patterns()) CHECK(p.find == p.replacement);

  auto scan = [&](const std::string& body) {
    stream_scrubber s(checks.patterns());
    std::string out;
    auto m = s.feed(body.substr(0, body.size() / 2), out);
    if (!m) m = s.feed(body.substr(body.size() / 2), out);
    if (!m) m = s.finish(out);
    CHECK(out == body);  // patterns replace with themselves: the body is unchanged
    return m ? checks.decision(*m) : broker::brokers::request_decision{};
  };
  auto real = scan("{\"token\":\"" + ai_real + "\"}");
  CHECK(real.action == request_action::real_secret_blocked);
  CHECK(real.credential == "openai");
  CHECK(real.where == "body");
  auto canary = scan("{\"token\":\"" + ai_dummy + "\"}");
  CHECK(canary.action == request_action::credential_not_bound);
  CHECK(canary.credential == "openai");
  auto own = scan("{\"token\":\"" + gh_dummy + "\"}");  // bound here: passes
  CHECK(own.action == request_action::pass);
}

TEST_CASE("apply finds values carried in header names", "[brokers][apply]") {
  const auto set = make_set();
  request dummy_in_name;
  dummy_in_name.headers.push_back({"X-" + gh_dummy, "1"});
  auto d = set.apply(to("evil.example.com"), dummy_in_name.target, dummy_in_name.headers);
  CHECK(d.action == request_action::credential_not_bound);
  CHECK(d.where == "header name");
  request real_in_name;
  real_in_name.headers.push_back({"X-" + gh_real, "1"});
  d = set.apply(to("api.github.com"), real_in_name.target, real_in_name.headers);
  CHECK(d.action == request_action::real_secret_blocked);
}

TEST_CASE("a credential with programs swaps for those programs only",
          "[brokers][apply][programs]") {
  std::vector<value_broker::init> list;
  list.push_back(make("github", "github", {"api.github.com"}, gh_real, gh_dummy));
  broker::test::program_files files;
  const auto git = files.add("usr/bin/git");
  const auto remote = files.add("usr/lib/git-core/git-remote-http");
  const auto gh = files.add("opt/bin/gh");
  const auto curl = files.add("usr/bin/curl");
  list.back().spec.programs = {git, files.path("usr/lib/git-core/git-remote-http*"), "*/gh"};
  credential_set set(brokers_of(std::move(list)));
  std::vector<std::shared_ptr<const broker::config::client_identity>> kept;
  auto from = [&](const std::vector<std::string>& exes) {
    kept.push_back(broker::test::program_files::held_by(exes));
    return request_context{"api.github.com", false, false, kept.back().get()};
  };
  for (const auto& exes :
       std::vector<std::vector<std::string>>{{git}, {remote}, {gh}, {remote, git}}) {
    INFO(exes[0]);
    request r;
    r.headers.push_back({"Authorization", "token " + gh_dummy});
    auto d = set.apply(from(exes), r.target, r.headers);
    CHECK(d.action == request_action::pass);
    CHECK(r.headers[2].value == "token " + gh_real);
  }
  // Another program, one nobody could identify, a listed one sharing its socket with another,
  // or a copy of a listed one elsewhere: the dummy is refused, never swapped.
  const auto copy = files.add("tmp/x/git");
  for (const auto& exes :
       std::vector<std::vector<std::string>>{{curl}, {""}, {git, curl}, {copy}}) {
    INFO(exes[0]);
    request r;
    r.headers.push_back({"Authorization", "token " + gh_dummy});
    auto d = set.apply(from(exes), r.target, r.headers);
    CHECK(d.action == request_action::credential_not_bound);
    CHECK(d.credential == "github");
    CHECK(r.headers[2].value == "token " + gh_dummy);
    // Nor may it go in a body: the dummy joins what a body is searched for.
    CHECK(set.request_body_scan(from(exes)).patterns().size() >
          set.request_body_scan(from({git})).patterns().size());
  }
  // A copy of gh where the session writes matches "*/gh" by its path only: whatever the session
  // put there is refused. The same file out of its reach is a program like any other; a search
  // that could not reach every process proves nothing.
  using broker::test::program_files;
  const auto gh_copy = files.add("tmp/x/gh");
  const auto in_tmp = broker::config::session_writes::through({files.path("tmp")});
  for (const auto& client :
       {program_files::held_by({gh_copy}, in_tmp), program_files::held_by({gh}, in_tmp, false),
        program_files::held_by({gh}, nullptr)}) {
    request r;
    r.headers.push_back({"Authorization", "token " + gh_dummy});
    CHECK(set.apply(request_context{"api.github.com", false, false, client.get()}, r.target,
                    r.headers)
              .action == request_action::credential_not_bound);
  }
  request r;
  r.headers.push_back({"Authorization", "token " + gh_dummy});
  const auto out_of_reach = program_files::held_by({gh_copy});
  CHECK(set.apply(request_context{"api.github.com", false, false, out_of_reach.get()}, r.target,
                  r.headers)
            .action == request_action::pass);
}
