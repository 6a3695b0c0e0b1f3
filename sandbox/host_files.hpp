// Reading what a session left, never through a link the session made (docs/security-model.md): the
// small file reads and directory listings that the end of a session, the saves of the places
// written through and the kept root share.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace broker::sandbox {

// The bytes of the regular file at `path`, whole, when it is at most `limit` bytes; nullopt
// for a larger one, a link (never followed), a FIFO (never waited on), a device or none.
std::optional<std::string> read_regular_file(const std::string& path, std::size_t limit);

// The names in the directory `dir` but "." and "..", sorted; empty when it cannot be read.
std::vector<std::string> directory_names(const std::string& dir);

}  // namespace broker::sandbox
