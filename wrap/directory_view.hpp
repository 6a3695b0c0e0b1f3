// A login file's directory as a netns child sees it, for an agent that replaces the file with
// rename(2) (DESIGN §9; Codex's auth.json): a mount on the file itself would make that rename
// fail (EBUSY), so the child gets a directory of the session's in place of the file's directory.
// In it: the login file's dummy copy, copies of the directory's other files and links, and its
// subdirectories bound from the real directory (their contents live). When the session ends, the
// files and directories the command changed or made there go back to the real directory, except
// the login file.
#pragma once

#include <ctime>
#include <string>
#include <string_view>
#include <vector>

namespace broker::wrap {

struct directory_view {
  std::string view;        // the session's directory the child sees at `target`
  std::string target;      // the real directory
  std::string login_name;  // the login file's name in it: never copied back
  std::vector<std::string> subdirs;  // bound from target into the view (empty directories here)
  struct copied {
    std::string name;
    long long size = 0;
    timespec mtime{};
  };
  std::vector<copied> files;  // as copied in: what "changed" is measured against
};

// Makes `view_dir` (which must not exist) as the view of `login_file`'s directory, with
// `login_copy` as the login file. Throws std::runtime_error naming the path that failed.
directory_view make_directory_view(const std::string& login_file, const std::string& view_dir,
                                   std::string_view login_copy);

// After the command: every regular file at the view's top level that it changed or made, except
// the login file, replaces its namesake in the real directory (atomically, its mode kept), and
// every directory it made there is copied in whole (regular files and directories). Returns the
// names copied back ("dir/" for a directory); `skipped` gets what cannot go back (a directory
// whose name the real directory took meanwhile, links and special files in a new one).
std::vector<std::string> copy_back(const directory_view& v, std::vector<std::string>* skipped);

}  // namespace broker::wrap
