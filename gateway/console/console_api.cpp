#include "gateway/console/console_api.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <set>

#include "base/text.hpp"
#include "config/units.hpp"
#include "gateway/admin_auth.hpp"
#include "gateway/gateway.hpp"
#include "session/audit_files.hpp"
#include "session/audit_merge.hpp"
#include "session/budget_text.hpp"
#include "session/log_reader.hpp"

namespace broker::gateway {
namespace {

using nlohmann::ordered_json;

std::int64_t epoch_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A query's number, clamped to [low, high]; `otherwise` when absent or not a number.
std::size_t number_in(const std::string& query, std::string_view name, std::size_t otherwise,
                      std::size_t low, std::size_t high) {
  const auto text = base::form_value(query, name);
  std::size_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return otherwise;
  return std::clamp(value, low, high);
}

struct paging {
  std::size_t page = 0;
  std::size_t per_page = console_api::default_per_page;
};
paging paging_of(const std::string& query) {
  return {
      number_in(query, "page", 0, 0, 1'000'000'000),
      number_in(query, "per_page", console_api::default_per_page, 1, console_api::max_per_page)};
}

ordered_json index_view(const console_index::stats& s) {
  return {{"ready", s.scanned},
          {"records", s.records},
          {"files", s.files},
          {"sessions", s.sessions},
          {"scan_ms", s.last_scan_ms}};
}

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

// "YYYY-MM-DD" of `days_ago` days before today (UTC).
std::string day_text(int days_ago) {
  using namespace std::chrono;
  const year_month_day ymd{floor<days>(system_clock::now()) - days(days_ago)};
  return fmt::format("{:04}-{:02}-{:02}", static_cast<int>(ymd.year()),
                     static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()));
}

}  // namespace

console_api::console_api(std::shared_ptr<gateway> team, std::filesystem::path log_dir)
    : team_(std::move(team)),
      log_dir_(std::move(log_dir)),
      index_(std::make_shared<console_index>(log_dir_)),
      scanner_(std::make_unique<console_scanner>(index_, std::chrono::seconds(1))) {}

std::uint64_t console_api::lines_in(const std::vector<session::replica_files>& files) {
  std::uint64_t total = 0;
  for (const auto& replica : files)
    for (const auto& file : replica.files) {
      std::error_code ec;
      const auto size = std::filesystem::file_size(file.path, ec);
      if (ec) continue;
      std::pair<std::uint64_t, std::uint64_t> known;
      {
        std::lock_guard lock(mutex_);
        if (const auto it = line_counts_.find(file.path.string()); it != line_counts_.end())
          known = it->second;
      }
      // Audit files only grow; one that shrank was replaced, and is counted again.
      if (size < known.first) known = {0, 0};
      if (size > known.first) {
        known.second += session::count_lines(file.path, known.first);
        known.first = size;
        std::lock_guard lock(mutex_);
        if (line_counts_.size() >= 100'000) line_counts_.clear();
        line_counts_[file.path.string()] = known;
      }
      total += known.second;
    }
  return total;
}

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
  const auto [page, per_page] = paging_of(query);
  const auto state = base::form_value(query, "state");
  const auto q = base::form_value(query, "q");
  std::vector<session_record> all;
  try {
    all = records();
  } catch (const std::runtime_error& e) {
    return admin_refusal(503, "state_unavailable", e.what());
  }
  const auto now = epoch_ms();
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
                           {"index", index_view(index_->statistics())}});
}

admin_response console_api::timeline(const std::string& path, const std::string& query) {
  // /api/console/sessions/ID/timeline
  constexpr std::string_view prefix = "/api/console/sessions/";
  const std::string rest = path.substr(prefix.size());
  const auto slash = rest.find('/');
  const std::string id = rest.substr(0, slash);
  if (slash == std::string::npos || rest.substr(slash + 1) != "timeline" ||
      !session::valid_session_name(id))
    return admin_refusal(404, "not_found", "expected GET /api/console/sessions/ID/timeline");
  const auto files = session::session_files(log_dir_, id);
  if (files.empty())
    return admin_refusal(404, "not_found", "no audit records of session " + base::printable(id));
  const auto per_page = paging_of(query).per_page;
  // Pages are oldest first; the default is the last (the newest records). A page nearer the
  // end is read from the files' ends, one nearer the start from their starts: what a page costs
  // is the records between it and the nearer end, not the session.
  const std::uint64_t total = lines_in(files);
  const std::size_t pages = std::max<std::size_t>(1, (total + per_page - 1) / per_page);
  const std::size_t page = number_in(query, "page", pages - 1, 0, pages - 1);
  const std::uint64_t first = page * per_page;
  std::vector<std::string> lines;
  if (total - first <= first) {
    lines = session::merged_tail(files, total - first);
    if (lines.size() > per_page) lines.resize(per_page);
  } else {
    session::merged_log reading(files);
    for (std::uint64_t n = 0; lines.size() < per_page;) {
      auto line = reading.next();
      if (!line) break;
      if (n++ >= first) lines.push_back(std::move(*line));
    }
  }
  auto taken = ordered_json::array();
  for (const auto& line : lines) {
    auto record = ordered_json::parse(line, nullptr, false);
    taken.push_back(record.is_discarded()
                        ? ordered_json{{"unparseable", base::printable(line.substr(0, 512))}}
                        : std::move(record));
  }
  ordered_json out{{"session", id},
                   {"total", total},
                   {"page", page},
                   {"pages", pages},
                   {"per_page", per_page},
                   {"records", taken},
                   {"verify", verification(id, files)}};
  for (const auto& r : records())
    if (r.id == id) out["registry"] = public_view(r, epoch_ms());
  return json_answer(200, out);
}

nlohmann::ordered_json console_api::verification(const std::string& id,
                                                 const std::vector<session::replica_files>& files) {
  // The files as they are now: a record appended, or one altered in place (its file's time),
  // makes a verdict stale.
  file_stamps now;
  for (const auto& replica : files)
    for (const auto& file : replica.files) {
      std::error_code ec;
      const auto size = std::filesystem::file_size(file.path, ec);
      const auto changed = std::filesystem::last_write_time(file.path, ec);
      now.emplace_back(file.path.string() + "\n" + std::to_string(size),
                       changed.time_since_epoch().count());
    }
  const auto current = [&]() -> const ordered_json* {
    const auto it = verdicts_.find(id);
    return it != verdicts_.end() && it->second.files == now ? &it->second.verdict : nullptr;
  };
  std::unique_lock lock(mutex_);
  if (const auto* v = current()) return *v;
  if (!verifying_) {
    if (verifier_.joinable()) verifier_.join();  // finished: verifying_ is reset last
    verifying_ = id;
    verifier_ = std::thread([this, id, files, now] {
      auto replicas = ordered_json::array();
      bool ok = true;
      for (const auto& replica : files) {
        const auto checked = session::verify_replica(replica, &stopping_);
        ok = ok && checked.ok;
        replicas.push_back({{"replica", replica.replica},
                            {"ok", checked.ok},
                            {"records", checked.records},
                            {"files", checked.files},
                            {"ended", checked.has_end},
                            {"signed", !checked.signer.empty()},
                            {"error", checked.error},
                            {"file", checked.bad_file.filename().string()},
                            {"line", checked.bad_line}});
      }
      std::lock_guard done(mutex_);
      if (!stopping_) {
        if (verdicts_.size() >= max_verdicts) verdicts_.clear();
        verdicts_[id] = {now, {{"ok", ok}, {"replicas", replicas}}};
      }
      verifying_.reset();
      verified_.notify_all();
    });
  }
  // A small session's verdict comes with its page; a large one's with a later ask.
  verified_.wait_for(lock, verify_wait, [&] { return current() != nullptr; });
  if (const auto* v = current()) return *v;
  return {{"pending", true}, {"verifying", verifying_.value_or("")}};
}

admin_response console_api::refusals(const std::string& query) {
  scanner_->wanted();
  const auto [page, per_page] = paging_of(query);
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
                           {"index", index_view(index_->statistics())}});
}

admin_response console_api::spend(const std::string& query) {
  scanner_->wanted();
  const int days = static_cast<int>(number_in(query, "days", 30, 1, 366));
  std::vector<std::string> day_list;
  for (int i = days - 1; i >= 0; --i) day_list.push_back(day_text(i));
  auto users = index_->users();
  try {
    for (const auto& r : records())
      if (!r.user.empty()) users[r.id] = r.user;
  } catch (const std::runtime_error&) {
    // The registry is away: the users the logs name will do.
  }
  const auto table = index_->spend(day_list.front());
  const auto user_of = [&](const std::string& session) {
    const auto it = users.find(session);
    return it == users.end() ? std::string("(no user)") : it->second;
  };
  // Per user and day, and per session over the whole window (its top ten by cost, then tokens).
  std::map<std::string, std::map<std::string, spend_cell>> by_user;  // user → day → cell
  std::map<std::string, std::map<std::string, spend_cell>> by_session;
  std::map<std::string, std::set<std::string>> sessions_of;  // "day\nuser" → sessions
  for (const auto& [day, sessions] : table)
    for (const auto& [session, cell] : sessions) {
      for (auto* target : {&by_user[user_of(session)][day], &by_session[session][day]}) {
        target->requests += cell.requests;
        target->llm_tokens += cell.llm_tokens;
        target->cost_usd += cell.cost_usd;
      }
      sessions_of[day + "\n" + user_of(session)].insert(session);
    }
  const auto series = [&](const std::map<std::string, spend_cell>& cells) {
    auto tokens = ordered_json::array();
    auto cost = ordered_json::array();
    for (const auto& day : day_list) {
      const auto it = cells.find(day);
      tokens.push_back(it == cells.end() ? 0 : it->second.llm_tokens);
      cost.push_back(it == cells.end() ? 0.0 : it->second.cost_usd);
    }
    return std::pair{tokens, cost};
  };
  auto users_out = ordered_json::array();
  auto rows = ordered_json::array();
  for (const auto& [user, cells] : by_user) {
    auto [tokens, cost] = series(cells);
    users_out.push_back({{"user", user}, {"llm_tokens", tokens}, {"cost_usd", cost}});
    for (const auto& [day, cell] : cells)
      rows.push_back({{"day", day},
                      {"user", user},
                      {"sessions", sessions_of[day + "\n" + user].size()},
                      {"responses", cell.requests},
                      {"llm_tokens", cell.llm_tokens},
                      {"cost_usd", cell.cost_usd}});
  }
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
    return a["day"] != b["day"] ? a["day"] > b["day"] : a["user"] < b["user"];
  });
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
  auto sessions_out = ordered_json::array();
  for (std::size_t i = 0; i < totals.size() && i < 10; ++i) {
    auto [tokens, cost] = series(by_session[totals[i].first]);
    sessions_out.push_back({{"session", totals[i].first},
                            {"user", user_of(totals[i].first)},
                            {"total_llm_tokens", totals[i].second.llm_tokens},
                            {"total_cost_usd", totals[i].second.cost_usd},
                            {"llm_tokens", tokens},
                            {"cost_usd", cost}});
  }
  return json_answer(200, {{"days", day_list},
                           {"users", users_out},
                           {"sessions", sessions_out},
                           {"table", rows},
                           {"index", index_view(index_->statistics())}});
}

}  // namespace broker::gateway
