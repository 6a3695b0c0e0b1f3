// What `wrap` kept out of the host (DESIGN §8.1) lives under `<log-dir>/<session>.kept/`, at
// the real absolute path it would have reached; `broker keep SESSION PATH` takes one in anyway.
#pragma once

#include <filesystem>

namespace broker::wrap {

// Where `path` was set aside under `kept_root` (path absolute and normal).
std::filesystem::path kept_path(const std::filesystem::path& kept_root,
                                const std::filesystem::path& path);

// Moves what was set aside for `path` to `path`: a file replaces what is there (atomically on
// one file system), a directory only where there is none. Throws std::runtime_error saying why
// not (nothing kept for it, its place taken).
void take_kept(const std::filesystem::path& kept_root, const std::filesystem::path& path);

}  // namespace broker::wrap
