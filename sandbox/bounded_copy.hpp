// Moving files between a netns child's directory views and the host (docs/security-model.md,
// "Copies are bounded"): regular files only, never a link, FIFO or device; holes kept (data extents
// only, SEEK_DATA/SEEK_HOLE); streamed through a fixed buffer, never read whole; within a size and
// a time budget shared by one session's copies. A move within one file system is a rename and costs
// nothing.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>

#include <sys/stat.h>

namespace broker::sandbox {

// What one session may copy between its views and the host, each way.
struct copy_budget {
  std::uint64_t file_bytes = 256ull << 20;  // one file's size (its apparent size, holes too)
  std::uint64_t total_bytes = 1ull << 30;   // the data copied in all
  std::chrono::steady_clock::time_point deadline;

  // The default bounds, with `time` from now.
  static copy_budget starting_now(std::chrono::milliseconds time = std::chrono::seconds(30));
};

enum class copy_result {
  done,
  not_regular,  // a link, FIFO, socket, device or directory: never copied
  too_large,    // past file_bytes, or past what is left of total_bytes
  too_slow,     // the deadline passed
  failed,       // an I/O error (errno says which)
};

// "larger than 256 MiB", "not a regular file", ...: why a file was not copied, for the user.
std::string describe(copy_result r, const copy_budget& budget);

// Copies the regular file `from` to `to` (replaced atomically: a temp file beside it renamed
// over it), its mode (set-ID bits dropped) and times kept. Neither path's last component is
// followed if it is a link.
copy_result copy_file(const std::string& from, const std::string& to, copy_budget& budget);

}  // namespace broker::sandbox
