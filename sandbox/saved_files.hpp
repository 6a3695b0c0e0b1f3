// Files and directories as they were when a session started, and putting them back when it
// ends (docs/security-model.md, "Nothing is lost"): what the session left at a path is set aside
// under the kept root, and what was there is made again exactly (content, mode, owner). Nothing is
// written through a link: a file comes back as a new file renamed into place, what the session left
// is moved aside, never followed. Used where the session's writes went through (workspace_guard).
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "sandbox/bounded_copy.hpp"
#include "sandbox/kept.hpp"

namespace broker::sandbox {

// A file or link as it was, or that there was none.
struct saved_file {
  bool exists = false;
  mode_t mode = 0;  // with the type bits
  uid_t uid = 0;
  gid_t gid = 0;
  std::string bytes;  // a file's content, a link's text
};

// A directory's entries as they were, at any depth (relative paths, parents first).
struct saved_tree {
  bool exists = false;
  saved_file self;  // the directory's mode and owner
  std::vector<std::pair<std::string, saved_file>> entries;
};

// What `path` is now, into `out`. False when it is larger than `limit` or than what is left of
// `budget` (which a saved file's bytes use up), or unreadable.
bool save_file(const std::string& path, saved_file& out, std::size_t limit, std::size_t& budget);

// What the directory (or file) at `path` is now, whole (at most 10,000 entries a directory, 16
// deep). False when too large to save.
bool save_tree(const std::string& path, saved_tree& tree, std::size_t limit, std::size_t& budget);

bool same_saved(const saved_file& a, const saved_file& b);

// `saved` made again at `path`, where nothing is any more (a directory: its mode and owner put
// back where it is): a file written whole and renamed into place, a link made; mode and owner
// (as root) as they were. False when it could not be.
bool put_back(const std::string& path, const saved_file& saved);

// One path to take back to what it was: what the session left there is set aside and `before`
// put back. `report`: a change of its own (not a part of one named above it); `mode_only`: a
// directory whose mode or owner alone changed, put back in place.
struct change {
  std::string path;
  saved_file before;
  bool report = true;
  bool mode_only = false;
};

// The changes that take the file or directory at `path` back to `before`, parents first: a
// directory the session made is set aside whole, a directory it removed or replaced is made
// again with every entry it had. `limit`: what a file may hold to be compared.
std::vector<change> changes_back(const std::string& path, const saved_tree& before,
                                 std::size_t limit);

// The host's side of a judgment: sets aside what the session left, puts back what was, and
// names each change in `kept` (what could not be done, in `warnings`).
class restorer {
 public:
  restorer(const std::string& kept_root, std::vector<kept_out>& kept,
           std::vector<std::string>& warnings);

  void keep_out(const change& c, const std::string& reason);
  void keep_out(const std::vector<change>& changes, const std::string& reason);

 private:
  // What is at `path` now, moved under the kept root; "" when it could not be moved.
  std::string move_aside(const std::string& path);

  const std::string& kept_root_;
  std::vector<kept_out>& kept_;
  std::vector<std::string>& warnings_;
  copy_budget budget_ = copy_budget::starting_now();
};

}  // namespace broker::sandbox
