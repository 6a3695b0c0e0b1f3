#include "gateway/console/console_api.hpp"

#include <algorithm>
#include <cstdlib>

#include "base/text.hpp"
#include "config/units.hpp"
#include "gateway/admin/admin_auth.hpp"
#include "gateway/console/console_query.hpp"
#include "gateway/gateway.hpp"
#include "session/budget_text.hpp"

namespace broker::gateway {
namespace {

using nlohmann::ordered_json;

// One budget as a bar: what is used of what is allowed, as the CLI writes them, and the share.
ordered_json bar(const std::string& name, std::string used, std::string limit, double fraction) {
  return {{"name", name},
          {"used", std::move(used)},
          {"limit", std::move(limit)},
          {"fraction", std::max(0.0, fraction)}};
}

ordered_json budget_bars(const config::budget_spec& limits, const session_usage& used,
                         std::int64_t age_ms) {
  auto out = ordered_json::array();
  const auto ratio = [](double a, double b) { return b > 0 ? a / b : (a > 0 ? 1.0 : 0.0); };
  if (limits.requests)
    out.push_back(bar("requests", std::to_string(used.requests), std::to_string(*limits.requests),
                      ratio(used.requests, *limits.requests)));
  if (limits.bytes_out)
    out.push_back(bar("bytes_out", session::format_size(used.bytes_out),
                      session::format_size(*limits.bytes_out),
                      ratio(used.bytes_out, *limits.bytes_out)));
  if (limits.bytes_in)
    out.push_back(bar("bytes_in", session::format_size(used.bytes_in),
                      session::format_size(*limits.bytes_in),
                      ratio(used.bytes_in, *limits.bytes_in)));
  if (limits.llm_tokens)
    out.push_back(bar("llm_tokens", std::to_string(used.llm_tokens),
                      std::to_string(*limits.llm_tokens),
                      ratio(used.llm_tokens, *limits.llm_tokens)));
  if (limits.cost_usd)
    out.push_back(bar("cost_usd", session::format_usd(used.cost_usd),
                      session::format_usd(*limits.cost_usd),
                      ratio(used.cost_usd, *limits.cost_usd)));
  if (limits.duration)
    out.push_back(
        bar("duration",
            config::format_duration(std::chrono::seconds(std::max<std::int64_t>(0, age_ms / 1000))),
            config::format_duration(*limits.duration),
            ratio(static_cast<double>(age_ms), static_cast<double>(limits.duration->count()))));
  return out;
}

bool matches(const session_record& r, const std::string& state, const std::string& q,
             std::int64_t now) {
  const bool expired = r.expires_ms && now >= r.expires_ms;
  const std::string its = r.revoked ? "revoked" : expired ? "expired" : "active";
  if (!state.empty() && state != "all" && state != its) return false;
  if (q.empty()) return true;
  if (r.id.find(q) != std::string::npos || r.user.find(q) != std::string::npos) return true;
  return std::any_of(r.labels.begin(), r.labels.end(), [&](const auto& label) {
    return label.first.find(q) != std::string::npos || label.second.find(q) != std::string::npos;
  });
}

// 1.5 s, unless BROKER_CONSOLE_VERIFY_WAIT_MS says otherwise (0-60000).
std::chrono::milliseconds verify_wait_from_environment() {
  const char* text = std::getenv("BROKER_CONSOLE_VERIFY_WAIT_MS");
  if (text == nullptr || *text == '\0') return std::chrono::milliseconds(1500);
  return std::chrono::milliseconds(
      console_query::number_in(std::string("v=") + text, "v", 1500, 0, 60'000));
}

}  // namespace

console_api::console_api(std::shared_ptr<gateway> team, std::filesystem::path log_dir)
    : verify_wait_(verify_wait_from_environment()),
      team_(std::move(team)),
      log_dir_(std::move(log_dir)),
      index_(std::make_shared<console_index>(log_dir_)),
      scanner_(std::make_unique<console_scanner>(index_, std::chrono::seconds(1))) {}

console_api::~console_api() {
  stopping_ = true;  // a verification under way ends at its next record
  if (verifier_.joinable()) verifier_.join();
}

std::vector<session_record> console_api::records() {
  std::lock_guard lock(mutex_);
  const auto now = std::chrono::steady_clock::now();
  if (records_at_ == std::chrono::steady_clock::time_point{} ||
      now - records_at_ >= std::chrono::seconds(1)) {
    records_ = team_->records();
    records_at_ = now;
  }
  return records_;
}

admin_response console_api::sessions(const std::string& query) {
  scanner_->wanted();
  const auto [page, per_page] = console_query::paging_of(query);
  const auto state = base::form_value(query, "state");
  const auto q = base::form_value(query, "q");
  std::vector<session_record> all;
  try {
    all = records();
  } catch (const std::runtime_error& e) {
    return admin_refusal(503, "state_unavailable", e.what());
  }
  const auto now = console_query::epoch_ms();
  std::size_t active = 0;
  std::vector<const session_record*> matching;
  // Newest first: the sessions an operator just made are on the first page.
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    if (!it->revoked && !(it->expires_ms && now >= it->expires_ms)) ++active;
    if (matches(*it, state, q, now)) matching.push_back(&*it);
  }
  auto rows = ordered_json::array();
  for (std::size_t i = page * per_page; i < matching.size() && rows.size() < per_page; ++i) {
    const auto& r = *matching[i];
    auto row = public_view(r, now);
    row["ttl_left_s"] = r.expires_ms
                            ? ordered_json(std::max<std::int64_t>(0, (r.expires_ms - now) / 1000))
                            : ordered_json(nullptr);
    const auto used = index_->usage(r.id).value_or(session_usage{});
    row["requests"] = used.requests;
    row["denied"] = used.denied;
    row["bytes_out"] = used.bytes_out;
    row["bytes_in"] = used.bytes_in;
    row["llm_tokens"] = used.llm_tokens;
    row["cost_usd"] = used.cost_usd;
    row["last_ts"] = used.last_ts;
    try {
      row["budgets"] = budget_bars(team_->budgets_of(r), used, now - r.created_ms);
    } catch (const std::exception& e) {
      row["budgets"] = ordered_json::array();
      row["budgets_error"] = e.what();
    }
    rows.push_back(std::move(row));
  }
  return json_answer(200, {{"total", matching.size()},
                           {"all", all.size()},
                           {"active", active},
                           {"page", page},
                           {"per_page", per_page},
                           {"sessions", rows},
                           {"index", console_query::index_view(index_->statistics())}});
}

admin_response console_api::refusals(const std::string& query) {
  scanner_->wanted();
  const auto [page, per_page] = console_query::paging_of(query);
  refusal_filter filter{base::form_value(query, "code"), base::form_value(query, "session"),
                        base::form_value(query, "host")};
  std::size_t total = 0;
  auto rows = ordered_json::array();
  for (const auto& row : index_->refusals(filter, page * per_page, per_page, total))
    rows.push_back({{"ts", row.ts},
                    {"session", row.session},
                    {"replica", row.replica},
                    {"seq", row.seq},
                    {"code", row.code},
                    {"method", row.method},
                    {"host", row.host},
                    {"path", row.path},
                    {"status", row.status},
                    {"rule", row.rule}});
  return json_answer(200, {{"total", total},
                           {"page", page},
                           {"per_page", per_page},
                           {"refusals", rows},
                           {"index", console_query::index_view(index_->statistics())}});
}

}  // namespace broker::gateway
