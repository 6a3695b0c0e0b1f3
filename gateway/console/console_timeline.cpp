// One session's timeline for the console (console_api.hpp): a page of its records, read from
// the nearer end of its files, and its chains' verdict, computed once on a thread of its own.
#include <filesystem>
#include <system_error>

#include "gateway/admin/admin_auth.hpp"
#include "gateway/console/console_api.hpp"
#include "gateway/console/console_query.hpp"
#include "gateway/gateway.hpp"
#include "session/audit_files.hpp"
#include "session/audit_merge.hpp"
#include "session/log_reader.hpp"

namespace broker::gateway {
namespace {
using nlohmann::ordered_json;
}  // namespace

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
  const auto per_page = console_query::paging_of(query).per_page;
  // Pages are oldest first; the default is the last (the newest records). A page nearer the
  // end is read from the files' ends, one nearer the start from their starts: what a page costs
  // is the records between it and the nearer end, not the session.
  const std::uint64_t total = lines_in(files);
  const std::size_t pages = std::max<std::size_t>(1, (total + per_page - 1) / per_page);
  const std::size_t page = console_query::number_in(query, "page", pages - 1, 0, pages - 1);
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
    if (r.id == id) out["registry"] = public_view(r, console_query::epoch_ms());
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
                            {"truncated", checked.truncated},
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
  verified_.wait_for(lock, verify_wait_, [&] { return current() != nullptr; });
  if (const auto* v = current()) return *v;
  return {{"pending", true}, {"verifying", verifying_.value_or("")}};
}

}  // namespace broker::gateway
