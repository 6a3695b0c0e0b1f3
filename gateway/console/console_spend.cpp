// The console's spend view (console_api.hpp): LLM tokens and cost per day, user and session,
// from the index of the audit files.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "gateway/admin/admin_auth.hpp"
#include "gateway/console/console_api.hpp"
#include "gateway/console/console_query.hpp"
#include "gateway/gateway.hpp"

namespace broker::gateway {
namespace {

using nlohmann::ordered_json;

// "YYYY-MM-DD" of `days_ago` days before today (UTC).
std::string day_text(int days_ago) {
  using namespace std::chrono;
  const year_month_day ymd{floor<days>(system_clock::now()) - days(days_ago)};
  return fmt::format("{:04}-{:02}-{:02}", static_cast<int>(ymd.year()),
                     static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()));
}

using cells_by_day = std::map<std::string, spend_cell>;

std::string user_of(const std::map<std::string, std::string>& users, const std::string& session) {
  const auto it = users.find(session);
  return it == users.end() ? std::string("(no user)") : it->second;
}

// The index's cells (day → session) summed per user and day, and per session and day.
struct spend_sums {
  std::map<std::string, cells_by_day> by_user;
  std::map<std::string, cells_by_day> by_session;
  std::map<std::string, std::set<std::string>> sessions_of;  // "day\nuser" → its sessions
};

spend_sums sum_up(const spend_table& table, const std::map<std::string, std::string>& users) {
  spend_sums out;
  for (const auto& [day, sessions] : table)
    for (const auto& [session, cell] : sessions) {
      const auto user = user_of(users, session);
      for (auto* target : {&out.by_user[user][day], &out.by_session[session][day]}) {
        target->requests += cell.requests;
        target->llm_tokens += cell.llm_tokens;
        target->cost_usd += cell.cost_usd;
      }
      out.sessions_of[day + "\n" + user].insert(session);
    }
  return out;
}

// Tokens and cost for each of `days` (0 for a day without spend): a chart's two series.
std::pair<ordered_json, ordered_json> series(const cells_by_day& cells,
                                             const std::vector<std::string>& days) {
  auto tokens = ordered_json::array();
  auto cost = ordered_json::array();
  for (const auto& day : days) {
    const auto it = cells.find(day);
    tokens.push_back(it == cells.end() ? 0 : it->second.llm_tokens);
    cost.push_back(it == cells.end() ? 0.0 : it->second.cost_usd);
  }
  return {tokens, cost};
}

// The `n` sessions that spent most over the window (by cost, then tokens), with their totals.
std::vector<std::pair<std::string, spend_cell>> top_sessions(
    const std::map<std::string, cells_by_day>& by_session, std::size_t n) {
  std::vector<std::pair<std::string, spend_cell>> totals;
  for (const auto& [session, cells] : by_session) {
    spend_cell sum;
    for (const auto& [day, cell] : cells) {
      sum.llm_tokens += cell.llm_tokens;
      sum.cost_usd += cell.cost_usd;
    }
    totals.emplace_back(session, sum);
  }
  std::sort(totals.begin(), totals.end(), [](const auto& a, const auto& b) {
    return a.second.cost_usd != b.second.cost_usd ? a.second.cost_usd > b.second.cost_usd
                                                  : a.second.llm_tokens > b.second.llm_tokens;
  });
  if (totals.size() > n) totals.resize(n);
  return totals;
}

}  // namespace

admin_response console_api::spend(const std::string& query) {
  scanner_->wanted();
  const int days = static_cast<int>(console_query::number_in(query, "days", 30, 1, 366));
  std::vector<std::string> day_list;
  for (int i = days - 1; i >= 0; --i) day_list.push_back(day_text(i));
  auto users = index_->users();
  try {
    for (const auto& r : records())
      if (!r.user.empty()) users[r.id] = r.user;
  } catch (const std::runtime_error&) {
    // The registry is away: the users the logs name will do.
  }
  const auto sums = sum_up(index_->spend(day_list.front()), users);
  auto users_out = ordered_json::array();
  auto rows = ordered_json::array();
  for (const auto& [user, cells] : sums.by_user) {
    auto [tokens, cost] = series(cells, day_list);
    users_out.push_back({{"user", user}, {"llm_tokens", tokens}, {"cost_usd", cost}});
    for (const auto& [day, cell] : cells)
      rows.push_back({{"day", day},
                      {"user", user},
                      {"sessions", sums.sessions_of.at(day + "\n" + user).size()},
                      {"responses", cell.requests},
                      {"llm_tokens", cell.llm_tokens},
                      {"cost_usd", cell.cost_usd}});
  }
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
    return a["day"] != b["day"] ? a["day"] > b["day"] : a["user"] < b["user"];
  });
  auto sessions_out = ordered_json::array();
  for (const auto& [session, total] : top_sessions(sums.by_session, 10)) {
    auto [tokens, cost] = series(sums.by_session.at(session), day_list);
    sessions_out.push_back({{"session", session},
                            {"user", user_of(users, session)},
                            {"total_llm_tokens", total.llm_tokens},
                            {"total_cost_usd", total.cost_usd},
                            {"llm_tokens", tokens},
                            {"cost_usd", cost}});
  }
  return json_answer(200, {{"days", day_list},
                           {"users", users_out},
                           {"sessions", sessions_out},
                           {"table", rows},
                           {"index", console_query::index_view(index_->statistics())}});
}

}  // namespace broker::gateway
