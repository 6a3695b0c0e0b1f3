#pragma once
// When an audit log's records reach the disk (docs/audit-log.md, --audit-sync): after each record
// (every), together by one thread of the process at most batch_delay after they were written
// (batch), or when the kernel writes them back (none). A broker killed at any instant loses no
// record it wrote either way (they are in the page cache); the sync is for the machine that
// stops with it.
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <vector>

namespace broker::session {

enum class audit_sync_mode { every, batch, none };

std::optional<audit_sync_mode> parse_audit_sync(std::string_view text);
std::string_view to_string(audit_sync_mode mode);

// fdatasync(2), or a test's fake of it: 0, or -1 with errno set.
using sync_call = std::function<int(int fd)>;

// One log's file as the syncer sees it: a descriptor of its own (a dup of the log's), so that
// the log may rotate or close its own while a sync runs. Thread-safe.
class audit_sync_file {
 public:
  explicit audit_sync_file(sync_call call);
  ~audit_sync_file();
  audit_sync_file(const audit_sync_file&) = delete;
  audit_sync_file& operator=(const audit_sync_file&) = delete;

  // The file to sync from now on is `fd`'s (duplicated); the one before is synced once more, at
  // the next sync, and closed. 0, or the errno of a failed dup.
  int follow(int fd);
  // Syncs each descriptor (the current one, and those it replaced). 0, or the errno of the first
  // sync that failed, which is also kept for error().
  int sync_now();
  // The errno of a sync that failed (then what it wrote may not be on the disk); 0 while none
  // has.
  int error() const { return error_.load(std::memory_order_acquire); }

  // Records were written to the file: the shared syncer syncs it at most batch_delay from now.
  static void written(const std::shared_ptr<audit_sync_file>& file);

 private:
  friend class audit_syncer;
  sync_call call_;
  std::mutex mutex_;
  int fd_ = -1;
  std::vector<int> replaced_;
  std::atomic<bool> queued_{false};  // waits in the syncer's queue
  std::atomic<int> error_{0};
};

// How long written records may wait for their sync in batch mode: half of docs/audit-log.md's 100
// ms, the other half left to the sync itself.
inline constexpr std::chrono::milliseconds batch_delay{50};

}  // namespace broker::session
