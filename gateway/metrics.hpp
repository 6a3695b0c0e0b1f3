// The gateway's Prometheus metrics (docs/gateway.md): what the proxy counted per session (requests,
// refusals, bytes, LLM tokens and cost), and families other parts of the broker own (open
// connections, the leaf cache, the Redis client), read from them at scrape time. render() writes
// the text exposition format 0.0.4 that the admin listener serves at GET /metrics.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "session/audit_record.hpp"

namespace broker::gateway {

// One scrape's text being written. Families come out sorted by name, each with its # HELP and
// # TYPE once and its samples together, however many writers declared it or in what order they
// wrote. Names are checked (a bad one is a bug in the broker: std::invalid_argument); label
// values are escaped and made valid UTF-8, since sessions and credentials are named by people.
class exposition {
 public:
  enum class kind { counter, gauge, histogram };
  struct label {
    std::string_view name;
    std::string_view value;
  };

  // Declares a family. Names match [a-zA-Z_:][a-zA-Z0-9_:]*; a counter's ends in "_total".
  // Declaring it again with the same kind is harmless (the help of the first declaration
  // stays); with another kind it is std::invalid_argument.
  void family(std::string_view name, std::string_view help, kind k);

  // One sample of a declared counter or gauge family. Label names match [a-zA-Z_][a-zA-Z0-9_]*.
  // Counts are written as integers; doubles in their shortest exact form, +Inf, -Inf or NaN.
  void sample(std::string_view name, std::initializer_list<label> labels, std::uint64_t value);
  void sample(std::string_view name, std::initializer_list<label> labels, double value);
  void sample(std::string_view name, std::span<const label> labels, std::uint64_t value);
  void sample(std::string_view name, std::span<const label> labels, double value);

  // One series of a declared histogram family from cumulative buckets, as a Prometheus client
  // (or redis_stats) keeps them: `cumulative[i]` observations were <= `upper_bounds[i]`
  // (ascending; the two the same length). Writes name_bucket{le=...} for each, then
  // le="+Inf" with `count` unless the last bound already is +Inf, then name_sum and name_count.
  void histogram(std::string_view name, std::span<const label> labels,
                 std::span<const double> upper_bounds, std::span<const std::uint64_t> cumulative,
                 double sum, std::uint64_t count);

  // The exposition so far.
  std::string text() const;

 private:
  struct family_text {
    std::string help;
    kind type;
    std::string samples;
  };
  family_text& declared(std::string_view name, kind expected_a, kind expected_b);
  static void write_series(std::string& out, std::string_view name, std::span<const label> labels,
                           std::string_view extra_name = {}, std::string_view extra_value = {});

  std::map<std::string, family_text, std::less<>> families_;
};

// The metrics registry. Thread-safe: exchange() and llm_cost() are called once per request from
// every proxy thread and lock one of `shard_count` mutexes (a session always lands in the same
// one), so requests of different sessions rarely wait for each other and a scrape never holds
// more than one shard at a time.
//
// Families (counters; labels session plus the one named):
//   broker_requests_total{session,event}     every audited exchange, tunnel, refusal, ...
//   broker_refusals_total{session,code}      refusals by docs/cli.md code
//   broker_bytes_total{session,direction}    bytes sent upstream ("out") and back ("in")
//   broker_llm_tokens_total{session,credential}
//   broker_llm_cost_usd_total{session,credential}
// The model of an LLM call is not a label: the client names it in its request body, so an agent
// could mint a series per request; per-model figures are in the audit log.
class metrics {
 public:
  // A session keeps at most this many label values per family (events, codes, credentials);
  // later values are counted under "(other)". Credentials come from the policy and codes from
  // the broker, so this is reached only by a bug or a very odd policy, never by traffic.
  static constexpr std::size_t max_values_per_family = 64;
  static constexpr std::string_view other_value = "(other)";

  // One audit record's worth: its event, its refusal code (when refused or when e.error is set;
  // "unknown" if refused without one), its bytes, and its LLM tokens when counted.
  void exchange(std::string_view session, const session::audit_entry& e);
  // The cost of one LLM call. Negative or NaN amounts are ignored (a counter never decreases).
  void llm_cost(std::string_view session, std::string_view credential, std::string_view model,
                double usd);
  // Drops every series of `session` (revoked or expired), so that the output does not grow with
  // every session the gateway ever held. A later exchange() starts it again from zero.
  void forget_session(std::string_view session);

  // A gauge read at every scrape, e.g. open connections. `read` runs on the scraping thread, so
  // it must be thread-safe; it should be quick. A bad name is std::invalid_argument.
  void add_gauge(std::string name, std::string help, std::function<double()> read);
  // Families someone else owns (the leaf cache, the Redis client's redis_stats, sessions held),
  // written by `collect` at every scrape, on the scraping thread.
  void add_collector(std::function<void(exposition&)> collect);

  // The exposition text. An exception from a gauge or collector propagates.
  std::string render() const;

 private:
  // Counts under one label's values, at most max_values_per_family of them.
  template <class Value>
  struct by_value {
    std::map<std::string, Value, std::less<>> values;
    void add(std::string_view key, Value n);
  };
  struct session_series {
    by_value<std::uint64_t> events;
    by_value<std::uint64_t> refusals;
    by_value<std::uint64_t> tokens;
    by_value<double> cost_usd;
    std::uint64_t bytes_out = 0;
    std::uint64_t bytes_in = 0;
  };
  struct text_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct alignas(64) shard {
    mutable std::mutex mutex;
    std::unordered_map<std::string, session_series, text_hash, std::equal_to<>> sessions;
  };
  static constexpr std::size_t shard_count = 16;

  shard& shard_of(std::string_view session);
  // The session's series, made on first use; called with its shard's mutex held.
  static session_series& series_of(shard& s, std::string_view session);

  std::array<shard, shard_count> shards_;

  struct gauge {
    std::string name;
    std::string help;
    std::function<double()> read;
  };
  mutable std::mutex callbacks_mutex_;
  std::vector<gauge> gauges_;
  std::vector<std::function<void(exposition&)>> collectors_;
};

}  // namespace broker::gateway
