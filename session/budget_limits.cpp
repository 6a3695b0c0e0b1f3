// tightest() from session/budget.hpp: one set of limits from every layer's "budgets".
#include <algorithm>

#include "session/budget.hpp"

namespace broker::session {
namespace {

using config::budget_amounts;

template <class T>
void take_min(std::optional<T>& into, const std::optional<T>& from) {
  if (from && (!into || *from < *into)) into = from;
}

void merge_amounts(budget_amounts& into, const budget_amounts& from) {
  take_min(into.requests, from.requests);
  take_min(into.bytes_out, from.bytes_out);
  take_min(into.bytes_in, from.bytes_in);
  take_min(into.llm_tokens, from.llm_tokens);
  take_min(into.cost_usd, from.cost_usd);
  if (!from.request_rate) return;
  if (!into.request_rate) {
    into.request_rate = from.request_rate;
    return;
  }
  // A bucket no larger and no faster than each layer's admits only what every one would.
  into.request_rate->per_second =
      std::min(into.request_rate->per_second, from.request_rate->per_second);
  into.request_rate->burst = std::min(into.request_rate->burst, from.request_rate->burst);
}

}  // namespace

budget_limits tightest(const std::vector<config::policy>& layers) {
  budget_limits out;
  for (const auto& layer : layers) {
    const auto& b = layer.budgets;
    merge_amounts(out, b);
    take_min(out.duration, b.duration);
    if (b.on_exhaust == config::exhaust_action::kill) out.on_exhaust = config::exhaust_action::kill;
    for (const auto& [model, price] : b.prices) out.prices.emplace(model, price);
    for (const auto& h : b.per_host) {
      auto same = std::find_if(out.per_host.begin(), out.per_host.end(),
                               [&](const auto& o) { return o.host.text() == h.host.text(); });
      if (same == out.per_host.end())
        out.per_host.push_back(h);
      else
        merge_amounts(*same, h);
    }
  }
  return out;
}

}  // namespace broker::session
