// A directory as a netns child sees it when what the child makes or changes there must be
// judged before it reaches the host (DESIGN §8.1, §9): a login file's directory (an agent that
// replaces the file with rename(2), like Codex's auth.json, cannot be shown a mount on the file
// itself: the rename would fail with EBUSY), and home_guard's directories. The child gets an
// overlay (overlayfs) at the directory: the real directory below, read-only to it and live; the
// view above, which holds the login file's dummy copy and takes every file the child changes or
// makes there (the kernel copies a file up on its first write, so starting costs no copy).
// Subdirectories are bound from the real directory over the overlay (their contents live), as
// are files too large to copy. Where the kernel refuses an overlay (an old kernel, a file
// system it cannot stack), the view is filled with copies instead and bound at the directory.
// When the session ends, the files and directories the command changed or made there go back to
// the real directory, except the login file. Both ways the copies are bounded (bounded_copy.hpp):
// what cannot go back (too large, too slow, not a regular file) is kept out, set aside and named.
#pragma once

#include <ctime>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "wrap/bounded_copy.hpp"

namespace broker::wrap {

struct directory_view {
  std::string view;                  // the overlay's upper directory: what the child made
  std::string work;                  // the overlay's work directory (same file system)
  std::string target;                // the real directory
  std::string login_name;            // the login file's name in it ("" for none): never copied back
  std::vector<std::string> hidden;   // never copied either way (masked files: empty here)
  bool links_go_back = false;        // new links go back like files (a PATH directory)
  std::vector<std::string> subdirs;  // bound from target over the view
  std::vector<std::string> live_files;  // too large to copy: bound from target over the view
  // The regular files the real directory held when the view was made: what "changed" is
  // measured against. A copy (the kernel's on first write, or fill_view_copies') keeps a file's
  // size and modification time, so a file the child only opened for writing still matches.
  struct copied {
    std::string name;
    long long size = 0;  // the real file's then
    timespec mtime{};
    struct stat_id {
      unsigned long long dev = 0, ino = 0;
      long long size = 0;
      timespec mtime{};
      bool operator==(const stat_id&) const;
    } real;                                   // the real file's then: has it changed since?
    std::shared_ptr<const std::string> base;  // its bytes then, when small: to merge with
  };
  std::vector<copied> files;
  std::vector<std::string> links;  // the links it held then (names)
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

// What a view shows: `target` (a directory) through `view` (which must not exist, nor its
// sibling `view` + ".work"), with a login file named `login_name` holding `login_copy` when
// there is one; `hidden` names (masked files) are never copied either way, and one missing
// from `target` stays missing, like the `absent` ones. `links_go_back`: a PATH directory, whose
// files are programs, not merged, so their bytes are not kept.
struct view_plan {
  std::string target, view;
  std::string login_name;
  std::string_view login_copy;
  std::vector<std::string> hidden;
  // Names missing from `target` above a masked path (~/.aws for ~/.aws/credentials): they stay
  // missing in the view whatever the host makes there during the session (the overlay's lower
  // layer is live); the command may make them, and what it makes goes back as usual.
  std::vector<std::string> absent;
  bool links_go_back = false;
};

// Makes the view: the two directories, the login file's copy, and the real directory's
// entries noted (files past `budget`'s file size are to be bound live). Throws
// std::runtime_error naming the path that failed.
directory_view make_directory_view(const view_plan& plan, copy_budget& budget);

// For a view the kernel would not stack (no overlay): the real directory's entries copied into
// the view, as the overlay would have shown them: its files (times kept), links, an empty
// directory for each subdirectory and each live file's and hidden name's place to mount on.
// `real` and `view` are paths to the two directories (in the child, /proc/self/fd/N paths
// opened before anything covered them). Returns "" or what failed.
std::string fill_view_copies(const directory_view& v, const std::string& real,
                             const std::string& view);

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
