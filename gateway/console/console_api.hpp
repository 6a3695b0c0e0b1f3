// The JSON behind the console's pages (console.hpp lists the routes): sessions with their
// counters and budgets, one session's timeline, refusals and spend, each a page at a time and
// filtered on this side, so that a page stays small however many sessions and records there are.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gateway/admin/admin_listener.hpp"
#include "gateway/console/console_index.hpp"
#include "gateway/session_record.hpp"
#include "session/audit_files.hpp"

namespace broker::gateway {

class gateway;

class console_api {
 public:
  console_api(std::shared_ptr<gateway> team, std::filesystem::path log_dir);
  ~console_api();
  console_api(const console_api&) = delete;
  console_api& operator=(const console_api&) = delete;

  admin_response sessions(const std::string& query);
  admin_response timeline(const std::string& path, const std::string& query);
  admin_response refusals(const std::string& query);
  admin_response spend(const std::string& query);

 private:
  // The registry's records, read again when the copy is older than a second.
  std::vector<session_record> records();
  // What `broker log --verify` says of each replica's chain: {"ok", "replicas": [...]}, kept
  // while the files are unchanged. Verifying reads the whole session, so it runs on a thread
  // of its own: the answer waits for it up to `verify_wait_`, then is {"pending": true} (the
  // page asks again) while it goes on.
  nlohmann::ordered_json verification(const std::string& id,
                                      const std::vector<session::replica_files>& files);
  // 1.5 s; the environment's BROKER_CONSOLE_VERIFY_WAIT_MS sets another (the tests' 0 makes
  // every first answer pending, whatever the session's length and the machine's speed).
  const std::chrono::milliseconds verify_wait_;
  // The lines of a session's files, each file counted only where it grew since the last time.
  std::uint64_t lines_in(const std::vector<session::replica_files>& files);

  std::shared_ptr<gateway> team_;
  const std::filesystem::path log_dir_;
  std::shared_ptr<console_index> index_;
  std::unique_ptr<console_scanner> scanner_;
  std::mutex mutex_;
  std::vector<session_record> records_;
  std::chrono::steady_clock::time_point records_at_{};
  using file_stamps = std::vector<std::pair<std::string, std::int64_t>>;  // path and size, time
  struct verdict {
    file_stamps files;
    nlohmann::ordered_json verdict;
  };
  static constexpr std::size_t max_verdicts = 256;
  std::map<std::string, verdict> verdicts_;  // under mutex_
  // A file's size when last counted, and its lines then (under mutex_).
  std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> line_counts_;
  std::condition_variable verified_;      // a verdict was added
  std::optional<std::string> verifying_;  // the session being verified, one at a time
  std::atomic<bool> stopping_{false};
  std::thread verifier_;
};

}  // namespace broker::gateway
