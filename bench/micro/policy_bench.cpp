// One policy evaluation as every request pays it (policy_set::check_request), against a policy
// of 1,000 allow rules (exact hosts, "*." wildcards, methods, paths, and half of them limited to
// programs by glob, docs/policy.md) and 20 deny rules: the request matched by the last rule (every
// rule is looked at), a refused one (every rule, no match), and the same without programs.
#include <benchmark/benchmark.h>
#include <sys/stat.h>

#include <string>

#include "config/policy_set.hpp"
#include "config/program_identity.hpp"

namespace {

using namespace broker;

std::string policy_text(bool programs) {
  std::string text = "{\"allow\": [";
  for (int i = 0; i < 1000; ++i) {
    if (i) text += ",";
    text += "{\"host\": \"";
    text += (i % 4 == 0 ? "*.svc" : "host") + std::to_string(i) + ".example.com\"";
    if (i % 3 == 0) text += ", \"methods\": [\"GET\", \"POST\"]";
    if (i % 5 == 0) text += ", \"paths\": [\"/v1/*\", \"/api/" + std::to_string(i) + "/*\"]";
    if (programs && i % 2 == 0)
      text +=
          ", \"programs\": [\"/usr/bin/git\", \"*/gh\", \"/usr/lib/git-core/git-remote-http*\"]";
    text += "}";
  }
  text += "], \"deny\": [";
  for (int i = 0; i < 20; ++i)
    text += std::string(i ? "," : "") + "{\"host\": \"blocked" + std::to_string(i) + ".test\"}";
  return text + "]}";
}

config::policy_set make(bool programs) {
  std::vector<config::policy> layers;
  layers.push_back(config::parse_policy(policy_text(programs), "bench.json"));
  return config::policy_set(std::move(layers));
}

void evaluate(benchmark::State& state, bool programs, const char* host, bool expect) {
  const auto set = make(programs);
  const config::destination d{host, std::nullopt, 443};
  // The connection's one holder runs /usr/bin/git, the very file, in a session that writes
  // nowhere outside its own.
  struct stat st {};
  if (::stat("/usr/bin/git", &st) != 0) return state.SkipWithError("no /usr/bin/git");
  config::client_identity git;
  git.holders.push_back({1234, "/usr/bin/git",
                         config::file_id{static_cast<std::uint64_t>(st.st_dev),
                                         static_cast<std::uint64_t>(st.st_ino)}});
  git.complete = true;
  git.writes = config::session_writes::through({});
  for (auto _ : state) {
    auto v = set.check_request(d, "GET", "/v1/items/42?x=1", {&git});
    if (v.allowed != expect) {
      state.SkipWithError("unexpected verdict");
      break;
    }
    benchmark::DoNotOptimize(v);
  }
}

void BM_policy_1000_rules_programs_last_rule(benchmark::State& s) {
  evaluate(s, true, "host998.example.com", true);  // 998: even, so it names programs
}
void BM_policy_1000_rules_programs_refused(benchmark::State& s) {
  evaluate(s, true, "nowhere.example.net", false);
}
void BM_policy_1000_rules_last_rule(benchmark::State& s) {
  evaluate(s, false, "host998.example.com", true);
}
void BM_policy_1000_rules_refused(benchmark::State& s) {
  evaluate(s, false, "nowhere.example.net", false);
}
BENCHMARK(BM_policy_1000_rules_programs_last_rule)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_policy_1000_rules_programs_refused)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_policy_1000_rules_last_rule)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_policy_1000_rules_refused)->Unit(benchmark::kMicrosecond);

}  // namespace
