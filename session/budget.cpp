#include "session/budget.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/saturating.hpp"
#include "session/budget_text.hpp"

namespace broker::session {
namespace {

using config::budget_amounts;

// Unpriced model names kept for `broker status`: a hint, not an inventory.
constexpr std::size_t max_unpriced_models = 16;
constexpr std::size_t max_budget_model_name = 100;
// A bucket refilled to 0.999999999 of a token by floating-point steps holds a whole one.
constexpr double token_epsilon = 1e-9;

// One count, size or cost budget with its usage, formatted only when someone reads it.
struct amount {
  enum kind_t { count, size, usd };
  const char* key;
  kind_t kind;
  std::uint64_t limit = 0, used = 0;  // count, size
  double limit_usd = 0, used_usd = 0;

  bool reached() const { return kind == usd ? used_usd >= limit_usd : used >= limit; }
  std::string text(std::uint64_t n, double dollars) const {
    if (kind == usd) return format_usd(dollars);
    return kind == size ? format_size(n) : std::to_string(n);
  }
  std::string limit_text() const { return text(limit, limit_usd); }
  std::string used_text() const { return text(used, used_usd); }
};

// Requests the bucket is short of full: "20" of "20/s" when it refuses.
std::string rate_used(const config::rate& r, double level) {
  return std::to_string(std::max(0LL, std::llround(std::ceil(r.burst - level - token_epsilon))));
}

// The set amounts among requests (when `with_requests`), bytes_out, bytes_in, llm_tokens and
// cost_usd, in that order (the order of checks and of the report); `visit` returns true to stop.
template <class Counters, class Visit>
void for_each_amount(const budget_amounts& l, const Counters& u, bool with_requests,
                     Visit&& visit) {
  if (with_requests && l.requests &&
      visit(amount{"requests", amount::count, *l.requests, u.requests}))
    return;
  if (l.bytes_out && visit(amount{"bytes_out", amount::size, *l.bytes_out, u.bytes_out})) return;
  if (l.bytes_in && visit(amount{"bytes_in", amount::size, *l.bytes_in, u.bytes_in})) return;
  if (l.llm_tokens && visit(amount{"llm_tokens", amount::count, *l.llm_tokens, u.llm_tokens}))
    return;
  if (l.cost_usd) visit(amount{"cost_usd", amount::usd, 0, 0, *l.cost_usd, u.cost_usd});
}

std::chrono::milliseconds elapsed_ms(std::chrono::steady_clock::duration elapsed,
                                     std::optional<std::chrono::milliseconds> limit) {
  auto ms = std::max(std::chrono::milliseconds(0),
                     std::chrono::duration_cast<std::chrono::milliseconds>(elapsed));
  // Whole seconds unless the limit itself has milliseconds: "2h3s", not "2h3s417ms".
  if (!limit || limit->count() % 1000 == 0)
    ms = std::chrono::duration_cast<std::chrono::seconds>(ms);
  return ms;
}

}  // namespace

double session_budget::bucket::level(const config::rate& r, clock::time_point now) const {
  if (now <= last) return tokens;
  double seconds = std::chrono::duration<double>(now - last).count();
  return std::min(r.burst, tokens + seconds * r.per_second);
}

session_budget::session_budget(budget_limits limits, clock::time_point start)
    : limits_(std::move(limits)),
      start_(start),
      kill_(limits_.on_exhaust == config::exhaust_action::kill),
      hosts_(limits_.per_host.size()) {
  auto fill = [start](counters& c, const std::optional<config::rate>& r) {
    c.rate.last = start;
    if (r) c.rate.tokens = r->burst;  // a session starts with a full bucket
  };
  fill(session_, limits_.request_rate);
  for (std::size_t i = 0; i < hosts_.size(); ++i) fill(hosts_[i], limits_.per_host[i].request_rate);
}

std::vector<std::size_t> session_budget::matching_hosts(std::string_view host) const {
  std::vector<std::size_t> out;
  if (limits_.per_host.empty()) return out;
  auto normalized = config::normalize_host(host);
  if (!normalized) return out;
  for (std::size_t i = 0; i < limits_.per_host.size(); ++i)
    if (limits_.per_host[i].host.matches(*normalized)) out.push_back(i);
  return out;
}

std::string session_budget::host_prefix(std::size_t index) const {
  return "per_host[" + limits_.per_host[index].host.text() + "].";
}

std::optional<exhausted> session_budget::over(const budget_amounts& limits, const counters& used,
                                              const std::string& prefix, bool with_requests) const {
  std::optional<exhausted> out;
  for_each_amount(limits, used, with_requests, [&](const amount& a) {
    if (!a.reached()) return false;
    out = exhausted{prefix + a.key, a.limit_text(), a.used_text(), kill_};
    return true;
  });
  return out;
}

std::optional<exhausted> session_budget::over_duration(clock::time_point now) const {
  if (!limits_.duration || now - start_ < *limits_.duration) return std::nullopt;
  return exhausted{"duration", config::format_duration(*limits_.duration),
                   config::format_duration(elapsed_ms(now - start_, limits_.duration)),
                   /*kill=*/true};
}

std::optional<exhausted> session_budget::admit(std::string_view host, clock::time_point now) {
  auto hosts = matching_hosts(host);
  std::lock_guard lock(mutex_);
  if (auto e = over_duration(now)) return e;
  if (auto e = over(limits_, session_, "", true)) return e;
  for (std::size_t i : hosts)
    if (auto e = over(limits_.per_host[i], hosts_[i], host_prefix(i), true)) return e;

  auto empty_bucket = [&](const budget_amounts& limits, const counters& used,
                          const std::string& prefix) -> std::optional<exhausted> {
    if (!limits.request_rate) return std::nullopt;
    const config::rate& r = *limits.request_rate;
    double level = used.rate.level(r, now);
    if (level >= 1 - token_epsilon) return std::nullopt;
    exhausted e{prefix + "rate", format_rate(r), rate_used(r, level), /*kill=*/false};
    e.retry_after =
        std::chrono::milliseconds(std::llround(std::ceil((1 - level) / r.per_second * 1000)));
    return e;
  };
  if (auto e = empty_bucket(limits_, session_, "")) return e;
  for (std::size_t i : hosts)
    if (auto e = empty_bucket(limits_.per_host[i], hosts_[i], host_prefix(i))) return e;

  auto charge = [&](const budget_amounts& limits, counters& used) {
    used.requests = base::saturating_add(used.requests, 1);
    if (!limits.request_rate) return;
    used.rate.tokens = std::max(0.0, used.rate.level(*limits.request_rate, now) - 1);
    used.rate.last = std::max(used.rate.last, now);
  };
  charge(limits_, session_);
  for (std::size_t i : hosts) charge(limits_.per_host[i], hosts_[i]);
  return std::nullopt;
}

void session_budget::add_bytes(std::string_view host, std::uint64_t out, std::uint64_t in) {
  auto hosts = matching_hosts(host);
  std::lock_guard lock(mutex_);
  auto add = [&](counters& c) {
    c.bytes_out = base::saturating_add(c.bytes_out, out);
    c.bytes_in = base::saturating_add(c.bytes_in, in);
  };
  add(session_);
  for (std::size_t i : hosts) add(hosts_[i]);
}

namespace {

// The price of `name` (lower case) in `prices`: its exact entry, else the longest "prefix*".
const config::model_price* find_price(const std::map<std::string, config::model_price>& prices,
                                      const std::string& name) {
  if (auto exact = prices.find(name); exact != prices.end()) return &exact->second;
  const config::model_price* price = nullptr;
  std::size_t longest = 0;
  for (const auto& [pattern, p] : prices) {
    if (pattern.back() != '*') continue;
    std::string_view prefix(pattern.data(), pattern.size() - 1);
    if (name.starts_with(prefix) && (!price || prefix.size() > longest)) {
      price = &p;
      longest = prefix.size();
    }
  }
  return price;
}

}  // namespace

double session_budget::price_of(std::string_view model, std::uint64_t input, std::uint64_t output,
                                bool& priced) const {
  std::string name(model);
  for (char& c : name)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
  // The policy's prices first; the models the agent profiles use have list prices built in.
  const config::model_price* price = find_price(limits_.prices, name);
  if (!price) price = find_price(default_model_prices(), name);
  priced = price != nullptr;
  if (!price) return 0;
  return (static_cast<double>(input) * price->input_per_mtok +
          static_cast<double>(output) * price->output_per_mtok) /
         1e6;
}

double session_budget::add_llm_usage(std::string_view host, std::string_view model,
                                     std::uint64_t input_tokens, std::uint64_t output_tokens) {
  bool priced = false;
  double cost = price_of(model, input_tokens, output_tokens, priced);
  std::uint64_t tokens = base::saturating_add(input_tokens, output_tokens);
  auto hosts = matching_hosts(host);
  std::lock_guard lock(mutex_);
  auto add = [&](counters& c) {
    c.llm_tokens = base::saturating_add(c.llm_tokens, tokens);
    c.cost_usd += cost;
  };
  add(session_);
  for (std::size_t i : hosts) add(hosts_[i]);
  if (priced || tokens == 0) return cost;
  unpriced_tokens_ = base::saturating_add(unpriced_tokens_, tokens);
  std::string name(model.substr(0, max_budget_model_name));
  if (name.empty()) name = "(none)";
  if (unpriced_models_.size() < max_unpriced_models &&
      std::find(unpriced_models_.begin(), unpriced_models_.end(), name) == unpriced_models_.end())
    unpriced_models_.push_back(std::move(name));
  return cost;
}

nlohmann::ordered_json session_budget::report(clock::time_point now) const {
  using nlohmann::ordered_json;
  auto entry = [](std::string limit, std::string used, bool reached) {
    return ordered_json{
        {"limit", std::move(limit)}, {"used", std::move(used)}, {"exhausted", reached}};
  };
  auto raw = [](const counters& c) {
    return ordered_json{{"requests", c.requests},
                        {"bytes_out", c.bytes_out},
                        {"bytes_in", c.bytes_in},
                        {"llm_tokens", c.llm_tokens},
                        {"cost_usd", c.cost_usd}};
  };
  std::lock_guard lock(mutex_);
  ordered_json j;
  j["on_exhaust"] = kill_ ? "kill" : "deny";
  auto elapsed = elapsed_ms(now - start_, limits_.duration);
  j["elapsed"] = config::format_duration(elapsed);
  j["elapsed_ms"] = std::max<std::int64_t>(
      0, std::chrono::duration_cast<std::chrono::milliseconds>(now - start_).count());

  ordered_json budgets = ordered_json::object();
  if (limits_.duration)
    budgets["duration"] = entry(config::format_duration(*limits_.duration),
                                config::format_duration(elapsed), over_duration(now).has_value());
  auto add = [&](const budget_amounts& limits, const counters& used, const std::string& prefix) {
    for_each_amount(limits, used, true, [&](const amount& a) {
      budgets[prefix + a.key] = entry(a.limit_text(), a.used_text(), a.reached());
      return false;
    });
    if (!limits.request_rate) return;
    double level = used.rate.level(*limits.request_rate, now);
    budgets[prefix + "rate"] =
        entry(format_rate(*limits.request_rate), rate_used(*limits.request_rate, level),
              level < 1 - token_epsilon);
  };
  add(limits_, session_, "");
  for (std::size_t i = 0; i < hosts_.size(); ++i)
    add(limits_.per_host[i], hosts_[i], host_prefix(i));
  j["budgets"] = std::move(budgets);

  ordered_json usage = raw(session_);
  usage["unpriced_tokens"] = unpriced_tokens_;
  usage["unpriced_models"] = unpriced_models_;
  j["usage"] = std::move(usage);
  ordered_json per_host = ordered_json::object();
  for (std::size_t i = 0; i < hosts_.size(); ++i)
    per_host[limits_.per_host[i].host.text()] = raw(hosts_[i]);
  j["per_host"] = std::move(per_host);
  return j;
}

std::optional<exhausted> session_budget::spent_locked(const std::vector<std::size_t>& hosts,
                                                      clock::time_point now) const {
  if (auto e = over_duration(now)) return e;
  if (auto e = over(limits_, session_, "", false)) return e;
  for (std::size_t i : hosts)
    if (auto e = over(limits_.per_host[i], hosts_[i], host_prefix(i), false)) return e;
  return std::nullopt;
}

std::optional<exhausted> session_budget::spent(clock::time_point now) const {
  std::lock_guard lock(mutex_);
  return spent_locked({}, now);
}

std::optional<exhausted> session_budget::spent(std::string_view host, clock::time_point now) const {
  auto hosts = matching_hosts(host);
  std::lock_guard lock(mutex_);
  return spent_locked(hosts, now);
}

session_budget::usage session_budget::used() const {
  std::lock_guard lock(mutex_);
  return session_;  // the usage part
}

}  // namespace broker::session
