// The JSON behind the console's pages (console.hpp lists the routes): sessions with their
// counters and budgets, one session's timeline, refusals and spend, each a page at a time and
// filtered on this side, so that a page stays small however many sessions and records there are.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gateway/admin_listener.hpp"
#include "gateway/console/console_index.hpp"
#include "gateway/session_record.hpp"

namespace broker::gateway {

class gateway;

class console_api {
 public:
  static constexpr std::size_t default_per_page = 50;
  static constexpr std::size_t max_per_page = 500;

  console_api(std::shared_ptr<gateway> team, std::filesystem::path log_dir);

  admin_response sessions(const std::string& query);
  admin_response timeline(const std::string& path, const std::string& query);
  admin_response refusals(const std::string& query);
  admin_response spend(const std::string& query);

 private:
  // The registry's records, read again when the copy is older than a second.
  std::vector<session_record> records();

  std::shared_ptr<gateway> team_;
  const std::filesystem::path log_dir_;
  std::shared_ptr<console_index> index_;
  std::unique_ptr<console_scanner> scanner_;
  std::mutex mutex_;
  std::vector<session_record> records_;
  std::chrono::steady_clock::time_point records_at_{};
};

}  // namespace broker::gateway
