// Replacing a file so that readers see the old content or the new, never a mix or a truncation.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string_view>

namespace broker::certs {

// Writes `bytes` to a new temp file next to `file` (O_EXCL|O_NOFOLLOW, exactly `mode` whatever
// the umask), fsyncs it and renames it over `file`. rename(2) replaces a symlink at `file` rather
// than writing through it. Throws ca_error naming the file; the temp file never outlives a failure.
void write_file_atomically(const std::filesystem::path& file, std::string_view bytes, mode_t mode);

}  // namespace broker::certs
