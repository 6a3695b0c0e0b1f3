// A user's real file that the broker keeps reading and writing while a session runs (a login
// file, docs/agents.md): opened once, before the child starts, and from then on reached only
// through that descriptor. Whatever the child later does to the path (renames a directory above it,
// makes a new file there, a FIFO or a link) cannot redirect a read or a write: a rotated real
// token can only ever land in the file the user had (docs/security-model.md).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "base/secret.hpp"

namespace broker::brokers {

class real_file {
 public:
  // Opens `path` read-write (read-only when it may not be written), without following a link at
  // its last component and without blocking: a regular file only. nullopt when there is none.
  // Throws source_error naming the path for anything else (a link, a FIFO, a device, a
  // directory, no permission).
  static std::optional<real_file> open(const std::string& path);

  real_file(real_file&& other) noexcept;
  real_file& operator=(real_file&&) = delete;
  real_file(const real_file&) = delete;
  ~real_file();

  const std::string& path() const { return path_; }

  // The whole file, up to `max_bytes` (more is a source_error).
  base::secret read(std::size_t max_bytes = 64 * 1024) const;
  // Replaces the content in place (one write from the start, cut to its length, synced).
  // Throws source_error, also when the file was opened read-only.
  void write(std::string_view text) const;
  // Whether the path still names this file (same device and inode), as seen from the broker.
  bool at_path() const;

 private:
  real_file(std::string path, int fd, bool writable, dev_t dev, ino_t ino)
      : path_(std::move(path)), fd_(fd), writable_(writable), dev_(dev), ino_(ino) {}

  std::string path_;
  int fd_ = -1;
  bool writable_ = false;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  mutable std::mutex write_mutex_;  // one refresh's write at a time
};

}  // namespace broker::brokers
