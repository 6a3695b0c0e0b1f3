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

const std::map<std::string, config::model_price>& default_model_prices() {
  // USD per million tokens, the providers' list prices for standard (not batch, not cached)
  // input and output as of December 2026. A policy's "prices" take precedence.
  static const std::map<std::string, config::model_price> prices{
      // OpenAI (Codex)
      {"gpt-5*", {1.25, 10}},
      {"gpt-5-mini*", {0.25, 2}},
      {"gpt-5-nano*", {0.05, 0.4}},
      {"gpt-5-pro*", {15, 120}},
      {"gpt-4.1*", {2, 8}},
      {"gpt-4.1-mini*", {0.4, 1.6}},
      {"gpt-4.1-nano*", {0.1, 0.4}},
      {"gpt-4o*", {2.5, 10}},
      {"gpt-4o-mini*", {0.15, 0.6}},
      {"o3*", {2, 8}},
      {"o4-mini*", {1.1, 4.4}},
      {"codex-mini*", {1.5, 6}},
      // Anthropic (Claude Code)
      {"claude-opus-4*", {15, 75}},
      {"claude-opus-4-5*", {5, 25}},
      {"claude-sonnet-4*", {3, 15}},
      {"claude-haiku-4*", {1, 5}},
      {"claude-3-7-sonnet*", {3, 15}},
      {"claude-3-5-sonnet*", {3, 15}},
      {"claude-3-5-haiku*", {0.8, 4}},
      // Google (Gemini CLI)
      {"gemini-3-pro*", {2, 12}},
      {"gemini-2.5-pro*", {1.25, 10}},
      {"gemini-2.5-flash*", {0.3, 2.5}},
      {"gemini-2.5-flash-lite*", {0.1, 0.4}},
      {"gemini-2.0-flash*", {0.1, 0.4}},
  };
  return prices;
}

budget_limits tightest(const std::vector<config::policy>& layers) {
  budget_limits out;
  for (const auto& layer : layers) {
    const auto& b = layer.budgets;
    merge_amounts(out, b);
    take_min(out.duration, b.duration);
    if (b.on_exhaust == config::exhaust_action::kill) out.on_exhaust = config::exhaust_action::kill;
    // "allow" holds only while no layer says "deny".
    if (b.allow_without_state && (!out.allow_without_state || !*b.allow_without_state))
      out.allow_without_state = *b.allow_without_state;
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
