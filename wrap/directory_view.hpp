// A login file's directory as a netns child sees it, for an agent that replaces the file with
// rename(2) (DESIGN §9; Codex's auth.json): a mount on the file itself would make that rename
// fail (EBUSY), so the child gets a directory of the session's in place of the file's directory.
// In it: the login file's dummy copy, copies of the directory's other files and links, and its
// subdirectories bound from the real directory (their contents live). When the session ends, the
// files and directories the command changed or made there go back to the real directory, except
// the login file. Both ways the copies are bounded (bounded_copy.hpp): a file too large to copy
// in is bound through live instead, and what cannot go back (too large, too slow, not a regular
// file) is kept out, set aside and named.
#pragma once

#include <ctime>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "wrap/bounded_copy.hpp"

namespace broker::wrap {

struct directory_view {
  std::string view;                  // the session's directory the child sees at `target`
  std::string target;                // the real directory
  std::string login_name;            // the login file's name in it ("" for none): never copied back
  std::vector<std::string> hidden;   // never copied either way (masked files: empty here)
  bool links_go_back = false;        // new links go back like files (a PATH directory)
  std::vector<std::string> subdirs;  // bound from target into the view (empty directories here)
  std::vector<std::string>
      live_files;  // too large to copy in: bound from target (empty files here)
  struct copied {
    std::string name;
    long long size = 0;  // the copy's, as made
    timespec mtime{};
    struct stat_id {
      unsigned long long dev = 0, ino = 0;
      long long size = 0;
      timespec mtime{};
      bool operator==(const stat_id&) const;
    } real;                                   // the real file's then: has it changed since?
    std::shared_ptr<const std::string> base;  // its bytes then, when small: to merge with
  };
  std::vector<copied> files;       // as copied in: what "changed" is measured against
  std::vector<std::string> links;  // links copied in as links (names)
};

// Something the command made in a view that does not go back to the host (DESIGN §8.1).
struct kept_out {
  std::string path;    // where it would have gone: the real absolute path
  std::string reason;  // why, for the user ("larger than 256 MiB", "not a regular file")
  std::string kept;    // where it was set aside; "" when it was removed
  // Where `kept` is an agent's key store (home_guard::agent_store): whether it differs from
  // what the store held before (a first sign-in, a new key), which is worth telling the user.
  bool stored = false, store_changed = false;
};

// What a view shows: `target` (a directory) at `view` (which must not exist), with a login file
// named `login_name` holding `login_copy` when there is one, and `hidden` names (masked
// files) as empty placeholders, never copied.
struct view_plan {
  std::string target, view;
  std::string login_name;
  std::string_view login_copy;
  std::vector<std::string> hidden;
  bool links_go_back = false;
};

// Makes the view; copies come out of `budget`. Throws std::runtime_error naming the path that
// failed.
directory_view make_directory_view(const view_plan& plan, copy_budget& budget);

class home_guard;

struct copy_back_result {
  std::vector<std::string> copied;  // names, "dir/" for a directory
  std::vector<kept_out> kept;
};

// After the command: every regular file at the view's top level that it changed or made, except
// the login file, replaces its namesake in the real directory (atomically, its mode kept), and
// every directory it made there goes over with its regular files and directories (moved when
// the view is on the real directory's file system, else copied within `budget`). What cannot
// go (a file past the budget, a link, FIFO or socket, a directory whose name the real
// directory took meanwhile, what `guard` keeps out) is moved under `kept_root` at its real
// absolute path. A file the host changed meanwhile too is merged (view_merge.hpp) or, when it
// cannot be, kept out; an agent's settings go back with the host's commands in them.
copy_back_result copy_back(const directory_view& v, const std::string& kept_root,
                           copy_budget& budget, const home_guard* guard = nullptr);

}  // namespace broker::wrap
