// Session budgets (docs/policy.md "budgets", docs/cli.md budget_exhausted): what a session has
// spent and whether the next request may go. The proxy admits each request here before forwarding
// it, reports bytes and LLM usage as they flow, and polls spent() to cut tunnels or end the
// session.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/policy.hpp"

namespace broker::session {

// The limits a session runs under: one budget_spec merged from every layer (tightest()).
using budget_limits = config::budget_spec;

// Merges the layers so that adding one can only narrow: each limit is the minimum of the layers
// that set it; a rate is the slowest refill with the smallest burst (a bucket that admits only
// what every layer's would); on_exhaust is kill if any layer says kill; prices are merged, the
// first layer to price a model pattern winning; per_host entries are merged per normalized
// pattern, the tightest per key.
budget_limits tightest(const std::vector<config::policy>& layers);

// List prices of the models the agent profiles use (docs/agents.md), for models no layer prices.
const std::map<std::string, config::model_price>& default_model_prices();

// A budget that refuses: the body of a 429 budget_exhausted.
struct exhausted {
  // "requests", "bytes_out", "bytes_in", "llm_tokens", "cost_usd", "duration", "rate", or a
  // per-host one: "per_host[api.openai.com].requests".
  std::string budget;
  std::string limit;  // human text: "5000", "100 MB", "2h", "$25.00", "20/s"
  std::string used;
  // End the child's process group: always for duration, never for rate (a momentary excess, not
  // a spent budget), otherwise when on_exhaust is "kill".
  bool kill = false;
  std::chrono::milliseconds retry_after{0};  // rate only: until the bucket holds a request again
};

// Thread-safe: one mutex guards all counters. Hosts are normalized here (config::normalize_host);
// an IP literal, or anything that is not a host name, matches no per_host pattern.
class session_budget {
 public:
  using clock = std::chrono::steady_clock;

  session_budget(budget_limits limits, clock::time_point start);

  // Before a request is forwarded: refused (nothing charged) when the session is past its
  // duration, a request/byte/token/cost budget of the session or of a per_host pattern matching
  // `host` has used >= its limit, or a rate bucket holds less than one request. Otherwise charges
  // one request and one rate token to the session and to every matching per_host pattern.
  // Checked in that order; the first refusing budget is reported.
  std::optional<exhausted> admit(std::string_view host, clock::time_point now);

  // As bytes move (any number of times per request; tunnels too). Saturates, never refuses: a
  // transfer in progress may overrun, spent() tells the proxy when to cut it.
  void add_bytes(std::string_view host, std::uint64_t out, std::uint64_t in);

  // After a response with LLM usage: input + output tokens, and their cost from the price table
  // (exact model name, else the longest matching prefix pattern; case-insensitive). A model
  // without a price (or "") costs 0 and its tokens are reported as unpriced. Returns the cost.
  double add_llm_usage(std::string_view host, std::string_view model, std::uint64_t input_tokens,
                       std::uint64_t output_tokens);

  // Whether a byte, token, cost or duration budget is spent (used >= limit): the session's, or
  // with a host also those of the per_host patterns matching it. Requests and rate are not
  // consumed by traffic already admitted, so they never appear here.
  std::optional<exhausted> spent(clock::time_point now) const;
  std::optional<exhausted> spent(std::string_view host, clock::time_point now) const;

  // For `broker status`: {"on_exhaust", "elapsed", "elapsed_ms", "budgets": {NAME: {"limit",
  // "used", "exhausted"}} for every budget set, "usage": raw session counters (with
  // "unpriced_tokens" and the first "unpriced_models"), "per_host": {PATTERN: raw counters}}.
  nlohmann::ordered_json report(clock::time_point now) const;

  const budget_limits& limits() const { return limits_; }

  // The session's own counters (per_host ones aside): what a gateway replica shares with the
  // others (gateway/redis/shared_budget.hpp), as the change since it last looked.
  struct usage {
    std::uint64_t requests = 0;
    std::uint64_t bytes_out = 0;
    std::uint64_t bytes_in = 0;
    std::uint64_t llm_tokens = 0;
    double cost_usd = 0;
  };
  usage used() const;

 private:
  struct bucket {
    double tokens = 0;
    clock::time_point last;
    double level(const config::rate& r, clock::time_point now) const;
  };
  struct counters : usage {
    bucket rate;
  };
  std::vector<std::size_t> matching_hosts(std::string_view host) const;
  std::optional<exhausted> over(const config::budget_amounts& limits, const counters& used,
                                const std::string& prefix, bool with_requests) const;
  std::optional<exhausted> over_duration(clock::time_point now) const;
  std::optional<exhausted> spent_locked(const std::vector<std::size_t>& hosts,
                                        clock::time_point now) const;
  std::string host_prefix(std::size_t index) const;
  double price_of(std::string_view model, std::uint64_t input, std::uint64_t output,
                  bool& priced) const;

  const budget_limits limits_;
  const clock::time_point start_;
  const bool kill_;  // on_exhaust == kill
  mutable std::mutex mutex_;
  counters session_;
  std::vector<counters> hosts_;  // parallel to limits_.per_host
  std::uint64_t unpriced_tokens_ = 0;
  std::vector<std::string> unpriced_models_;  // the first few distinct names, for status
};

}  // namespace broker::session
