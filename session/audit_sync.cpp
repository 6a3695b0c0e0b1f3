#include "session/audit_sync.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <deque>
#include <thread>
#include <utility>

namespace broker::session {

std::optional<audit_sync_mode> parse_audit_sync(std::string_view text) {
  if (text == "every") return audit_sync_mode::every;
  if (text == "batch") return audit_sync_mode::batch;
  if (text == "none") return audit_sync_mode::none;
  return std::nullopt;
}

std::string_view to_string(audit_sync_mode mode) {
  switch (mode) {
    case audit_sync_mode::every:
      return "every";
    case audit_sync_mode::batch:
      return "batch";
    case audit_sync_mode::none:
      return "none";
  }
  return "batch";
}

audit_sync_file::audit_sync_file(sync_call call) : call_(std::move(call)) {
  if (!call_) call_ = [](int fd) { return ::fdatasync(fd); };
}

audit_sync_file::~audit_sync_file() {
  if (fd_ >= 0) ::close(fd_);
  for (int fd : replaced_) ::close(fd);
}

int audit_sync_file::follow(int fd) {
  const int copy = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (copy < 0) return errno;
  std::lock_guard lock(mutex_);
  if (fd_ >= 0) replaced_.push_back(fd_);
  fd_ = copy;
  return 0;
}

int audit_sync_file::sync_now() {
  std::lock_guard lock(mutex_);
  int failed = 0;
  auto sync = [&](int fd) {
    if (call_(fd) != 0 && failed == 0) failed = errno != 0 ? errno : EIO;
  };
  for (int fd : replaced_) {
    sync(fd);
    ::close(fd);
  }
  replaced_.clear();
  if (fd_ >= 0) sync(fd_);
  if (failed != 0) {
    int none = 0;
    error_.compare_exchange_strong(none, failed, std::memory_order_acq_rel);
  }
  return failed;
}

// The process's one syncing thread: files are synced in the order they were first written
// since their last sync, each batch_delay after that first write, so a busy file costs one
// fdatasync per batch_delay whatever its request rate, and no request waits for one.
class audit_syncer {
 public:
  static audit_syncer& shared() {
    // Never destroyed: the thread may be syncing while the process exits (a session's end
    // syncs its own file first, on its own thread).
    static auto* syncer = new audit_syncer();
    return *syncer;
  }

  void queue(std::shared_ptr<audit_sync_file> file) {
    std::lock_guard lock(mutex_);
    if (!started_) {
      std::thread([this] { run(); }).detach();
      started_ = true;
    }
    due_.emplace_back(std::chrono::steady_clock::now() + batch_delay, std::move(file));
    if (due_.size() == 1) wake_.notify_one();
  }

 private:
  using entry = std::pair<std::chrono::steady_clock::time_point, std::shared_ptr<audit_sync_file>>;

  void run() {
    std::unique_lock lock(mutex_);
    for (;;) {
      wake_.wait(lock, [this] { return !due_.empty(); });
      const auto when = due_.front().first;
      if (std::chrono::steady_clock::now() < when) {
        wake_.wait_until(lock, when);
        continue;
      }
      // Every file due by now goes in this round; later ones keep their place.
      const auto now = std::chrono::steady_clock::now();
      std::vector<entry> round;
      while (!due_.empty() && due_.front().first <= now) {
        round.push_back(std::move(due_.front()));
        due_.pop_front();
      }
      lock.unlock();
      for (auto& [_, file] : round) {
        // Records written from here on queue the file again: this sync may miss them.
        file->queued_.store(false, std::memory_order_release);
        file->sync_now();
      }
      round.clear();  // the last owner of a closed log's file closes it here, unlocked
      lock.lock();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<entry> due_;  // in the order queued, so by time
  bool started_ = false;
};

void audit_sync_file::written(const std::shared_ptr<audit_sync_file>& file) {
  if (file->queued_.exchange(true, std::memory_order_acq_rel)) return;
  audit_syncer::shared().queue(file);
}

}  // namespace broker::session
