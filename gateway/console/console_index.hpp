// What the operators' console shows across sessions (docs/gateway.md), read from the audit files of
// every session in the log directory (audit_files.hpp: every replica that writes there, so the
// replicas of one host, or of a shared directory, are merged): each session's counters, the
// latest refusals, and LLM tokens and cost per day, session and user.
//
// A scan reads only what was appended since the last one (each file's offset is kept), and lists
// a session's directory again only when its time changed, so after the first scan a refresh
// costs a stat per file and directory, and the new lines. The index holds counters,
// not records: memory grows with sessions and days, not with records, and the refusals kept are
// the latest `max_refusals`.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace broker::gateway {

struct session_usage {
  std::string user;  // from its session_start
  std::uint64_t requests = 0;
  std::uint64_t denied = 0;
  std::uint64_t bytes_out = 0;
  std::uint64_t bytes_in = 0;
  std::uint64_t llm_tokens = 0;
  double cost_usd = 0;
  std::string last_ts;  // its newest record's
};

struct refusal_row {
  std::string ts;
  std::string session;
  std::string replica;
  std::uint64_t seq = 0;
  std::string code;  // the record's "error"
  std::string method;
  std::string host;
  std::string path;
  int status = 0;
  std::string rule;
};

struct refusal_filter {
  std::string code;
  std::string session;
  std::string host;  // a substring of the host
};

struct spend_cell {
  std::uint64_t requests = 0;  // LLM responses
  std::uint64_t llm_tokens = 0;
  double cost_usd = 0;
};

// LLM spend per day ("YYYY-MM-DD", UTC) and session.
using spend_table = std::map<std::string, std::map<std::string, spend_cell>>;

class console_index {
 public:
  explicit console_index(std::filesystem::path dir, std::size_t max_refusals = 10'000);

  // Reads what the files gained since the last scan. Not thread-safe with itself (one scanner);
  // the readers below may run meanwhile. When `stop` turns true the scan ends at the next
  // record (a gateway's stop never waits for a first scan of a large log directory); the next
  // scan goes on from there.
  void scan(const std::atomic<bool>* stop = nullptr);

  std::optional<session_usage> usage(const std::string& session) const;
  // The newest refusals first that match; `total` gets how many match among those kept.
  std::vector<refusal_row> refusals(const refusal_filter& filter, std::size_t offset,
                                    std::size_t limit, std::size_t& total) const;
  // Days at or after `since` ("YYYY-MM-DD"; "" for every day).
  spend_table spend(const std::string& since) const;
  std::map<std::string, std::string> users() const;  // session → user, for those that name one

  struct stats {
    std::uint64_t records = 0;  // read so far
    std::uint64_t files = 0;
    std::uint64_t sessions = 0;
    double last_scan_ms = 0;
    bool scanned = false;  // at least one scan has finished
  };
  stats statistics() const;

 private:
  struct file_state {
    std::string session;
    std::string replica;
    std::uint64_t offset = 0;
  };
  void read_new(const std::filesystem::path& path, file_state& state,
                const std::atomic<bool>* stop);
  void take(const std::string& line, const file_state& state);

  const std::filesystem::path dir_;
  const std::size_t max_refusals_;
  // The scanner's alone: every file read, and each session directory's time as last listed.
  std::map<std::filesystem::path, file_state> files_;
  std::map<std::filesystem::path, std::filesystem::file_time_type> directories_;

  mutable std::mutex mutex_;
  std::map<std::string, session_usage> sessions_;
  std::vector<refusal_row> refusals_;  // a ring of max_refusals_, next_refusal_ is the oldest
  std::size_t next_refusal_ = 0;
  spend_table spend_;
  stats stats_;
};

// Scans `index` on its own thread while someone looks: a scan at most every `every`, and none
// once nobody has asked (wanted()) for `idle_after`, so an unwatched gateway pays nothing.
class console_scanner {
 public:
  console_scanner(std::shared_ptr<console_index> index, std::chrono::milliseconds every,
                  std::chrono::milliseconds idle_after = std::chrono::seconds(60));
  ~console_scanner();
  console_scanner(const console_scanner&) = delete;
  console_scanner& operator=(const console_scanner&) = delete;

  // A reader is about to look: scans resume (at once when none ran for `every`).
  void wanted();

 private:
  void run();
  std::shared_ptr<console_index> index_;
  const std::chrono::milliseconds every_;
  const std::chrono::milliseconds idle_after_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::chrono::steady_clock::time_point wanted_at_{};
  bool stop_ = false;
  std::atomic<bool> stopping_{false};  // stop_, read by a scan under way without the lock
  std::thread thread_;
};

}  // namespace broker::gateway
