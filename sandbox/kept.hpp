// What `wrap` kept out of the host (docs/security-model.md) lives under
// `<log-dir>/<session>.kept/`, at the real absolute path it would have reached; `broker keep
// SESSION PATH` takes one in anyway.
#pragma once

#include <filesystem>
#include <string>

#include "sandbox/bounded_copy.hpp"

namespace broker::sandbox {

// Something the session changed that does not reach the host (docs/security-model.md).
struct kept_out {
  std::string path;    // where it would have gone: the real absolute path
  std::string reason;  // why, for the user ("written outside the workspace", "a git hook")
  std::string kept;    // where the session's version was set aside; "" when there is none
  // What kind of change: the session's version is set aside (`kept`), the session removed a
  // file the host keeps, or the change was dropped (a cache, what an agent makes again).
  enum change { set_aside, removed, dropped } what = set_aside;
  // Where `kept` is an agent's key store (home_rules' key_store): whether it differs from what
  // the store held before (a first sign-in, a new key), which is worth telling the user.
  bool stored = false, store_changed = false;
};

// Where `path` was set aside under `kept_root` (path absolute and normal).
std::filesystem::path kept_path(const std::filesystem::path& kept_root,
                                const std::filesystem::path& path);

// Moves `from` to `to` (a place under a kept root, whose parent exists): renamed, or where
// that crosses file systems, copied and then removed: a regular file whatever its size, holes
// kept; a link made again with its text, never followed; a directory entry by entry (at most
// 100,000). Within `budget`'s time; other kinds of file are not moved. False when it could not
// be moved whole (what was not moved stays at `from`).
bool set_aside(const std::string& from, const std::string& to, copy_budget& budget);

// Moves what was set aside for `path` to `path`: a file replaces what is there (atomically on
// one file system), a directory only where there is none. Throws std::runtime_error saying why
// not (nothing kept for it, its place taken).
void take_kept(const std::filesystem::path& kept_root, const std::filesystem::path& path);

}  // namespace broker::sandbox
