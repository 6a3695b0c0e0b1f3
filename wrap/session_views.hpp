// One wrap session's directory views (DESIGN §8.1, §9), assembled for `wrap`: where they live,
// the ones home_guard asks for beside the login files' own, and when the command has ended, what
// goes back from them and what is kept out and set aside (with what the session left in the
// workspace's other git directories).
#pragma once

#include <ctime>
#include <filesystem>
#include <string>
#include <vector>

#include "wrap/bounded_copy.hpp"
#include "wrap/child_session.hpp"
#include "wrap/directory_view.hpp"
#include "wrap/home_guard.hpp"

namespace broker::wrap {

// On a memory file system of the user's own when there is one (/dev/shm/broker-UID, 0700): a
// view holds an empty directory for each subdirectory it binds through, and a disk makes each
// cost ~0.1 ms to make and as much to remove. Else beside the log.
std::filesystem::path views_place(const std::filesystem::path& log_dir,
                                  const std::string& session_id);

// The views `guard` asks for, added to `views` (each hides the masked files and login files of
// `launch` that sit in it; a directory that is a login file's view already is left as it is),
// then `views` ordered parents first. Returns warnings for the user.
std::vector<std::string> add_guard_views(const home_guard& guard, const std::string& cwd,
                                         const launch_options& launch,
                                         std::vector<directory_view>& views,
                                         const std::filesystem::path& views_dir,
                                         copy_budget& budget);

// The agents' key stores kept from earlier sessions (home_guard::agent_store), each copied into
// the view where it belongs when the home has no file there (add_guard_views calls it).
void show_agent_stores(const home_guard& guard, const std::vector<directory_view>& views,
                       std::vector<std::string>& warnings);

struct views_returned {
  std::vector<kept_out> kept;         // set aside under the kept root
  std::vector<std::string> copied;    // real paths that went back ("dir/" for a directory)
  std::vector<std::string> warnings;  // for the user
};

// Every view's changes back to its real directory, children first, within one copy budget;
// what may not go back (`guard`) is set aside under `kept_root`. `views_dir` is removed unless
// something could not be set aside (it is named where it was left).
views_returned return_views(const std::vector<directory_view>& views,
                            const std::filesystem::path& views_dir,
                            const std::filesystem::path& kept_root, const home_guard* guard);

// Hooks and config commands the session (started at `since`) left in git directories under
// `cwd` other than its own repository's (made or cloned inside, or there before): set aside
// under `kept_root` too and added to `out`. Never a walk of the whole home; the log directory
// (where kept-out repositories are) is not searched.
void keep_out_git_leftovers(const std::string& cwd, const std::string& home, const timespec& since,
                            const std::filesystem::path& log_dir,
                            const std::filesystem::path& kept_root, views_returned& out);

}  // namespace broker::wrap
