// Replacing a file so that readers see the old content or the new, never a mix or a truncation.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <stdexcept>
#include <string_view>

namespace broker::base {

// A file that could not be written or made; the message names it and why.
class file_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// How long the file must outlive a crash. `session`: a file of a running session's own directory
// (the child's trust bundle, dummy copies), removed when the session ends and useless after a
// crash, so it is not fsynced: on a disk-backed /tmp each fsync costs milliseconds of start-up.
enum class durability { synced, session };

// Writes `bytes` to a new temp file next to `file` (O_EXCL|O_NOFOLLOW, exactly `mode` whatever
// the umask), fsyncs it (when `synced`) and renames it over `file`. rename(2) replaces a symlink
// at `file` rather than writing through it. Readers see the old content or the new either way.
// Throws file_error naming the file; the temp file never outlives a failure.
void write_file_atomically(const std::filesystem::path& file, std::string_view bytes, mode_t mode,
                           durability lasting = durability::synced);

// Makes `file` with `bytes` (exactly `mode`, synced) unless a file is there already, which it
// never replaces: a new temp file is hard-linked to `file`, so of two processes making the same
// file at once one wins, and both then read the winner's. Returns whether this call made it.
// Throws file_error naming the file; the temp file never outlives the call.
bool create_file_once(const std::filesystem::path& file, std::string_view bytes, mode_t mode);

}  // namespace broker::base
