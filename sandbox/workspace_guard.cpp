#include "sandbox/workspace_guard.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include "sandbox/git_config.hpp"
#include "sandbox/host_files.hpp"
#include "sandbox/path_lists.hpp"
#include "sandbox/saved_files.hpp"

namespace broker::sandbox {

namespace {

namespace fs = std::filesystem;
using clock = std::chrono::steady_clock;

// Files tools load by themselves from the directory they work in, with no review.
constexpr const char* loaded_names[] = {".envrc",          ".mcp.json", "CLAUDE.md",
                                        "CLAUDE.local.md", "AGENTS.md", "GEMINI.md",
                                        ".claude",         ".gemini",   ".codex"};
// In a .vscode directory: tasks that run when the folder opens, settings that name programs.
constexpr const char* vscode_names[] = {"tasks.json", "settings.json"};

bool loaded_name(const std::string& dir_name, const std::string& name) {
  if (dir_name == ".vscode")
    return std::any_of(std::begin(vscode_names), std::end(vscode_names),
                       [&](const char* n) { return name == n; });
  return std::any_of(std::begin(loaded_names), std::end(loaded_names),
                     [&](const char* n) { return name == n; });
}

struct dir_entry {
  std::string name;
  unsigned char type;  // DT_*
};

std::vector<dir_entry> dir_entries(int dir_fd) {
  std::vector<dir_entry> out;
  const int copy = ::dup(dir_fd);
  if (copy < 0) return out;
  std::unique_ptr<DIR, int (*)(DIR*)> d(::fdopendir(copy), ::closedir);
  if (!d) {
    ::close(copy);
    return out;
  }
  while (const dirent* e = ::readdir(d.get())) {
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    unsigned char type = e->d_type;
    if (type == DT_UNKNOWN) {
      struct stat st {};
      if (::fstatat(dir_fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
        type = S_ISDIR(st.st_mode)   ? DT_DIR
               : S_ISREG(st.st_mode) ? DT_REG
               : S_ISLNK(st.st_mode) ? DT_LNK
                                     : DT_UNKNOWN;
    }
    out.push_back({e->d_name, type});
  }
  std::sort(out.begin(), out.end(),
            [](const dir_entry& a, const dir_entry& b) { return a.name < b.name; });
  return out;
}

bool has_entry(const std::vector<dir_entry>& list, const char* name, unsigned char type) {
  return std::any_of(list.begin(), list.end(), [&](const dir_entry& e) {
    return e.name == name && (e.type == type || (type == DT_REG && e.type == DT_LNK));
  });
}

// A directory git takes for a git directory: HEAD, with objects and refs or a commondir.
bool is_git_dir(const std::vector<dir_entry>& list) {
  return has_entry(list, "HEAD", DT_REG) &&
         ((has_entry(list, "objects", DT_DIR) && has_entry(list, "refs", DT_DIR)) ||
          has_entry(list, "commondir", DT_REG));
}

struct found_set {
  struct git {
    std::string path;
    dev_t dev;
    ino_t ino;
  };
  std::vector<git> git_dirs;
  std::vector<std::string> gitfiles;
  std::vector<std::pair<std::string, bool>> loaded;  // path, is a directory
};

class tree_walker {
 public:
  tree_walker(const std::vector<std::string>& skip, const workspace_limits& limits)
      : skip_(skip), limits_(limits), deadline_(clock::now() + limits.time) {}

  void walk(const std::string& root) {
    const int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return;
    visit(fd, root, fs::path(root).filename().string(), 0);
    ::close(fd);
  }

  found_set found;
  bool complete = true;

 private:
  void visit(int fd, const std::string& path, const std::string& name, int depth) {
    if (!complete) return;
    const auto list = dir_entries(fd);
    const bool git = is_git_dir(list);
    if (git) {
      struct stat st {};
      if (::fstat(fd, &st) == 0) found.git_dirs.push_back({path, st.st_dev, st.st_ino});
    }
    for (const auto& e : list) {
      if (++seen_ > limits_.entries || clock::now() > deadline_) {
        complete = false;
        return;
      }
      const std::string child = path + "/" + e.name;
      if (!git && loaded_name(name, e.name)) {
        found.loaded.emplace_back(child, e.type == DT_DIR);
        continue;
      }
      if (e.name == ".git" && e.type == DT_REG) found.gitfiles.push_back(child);
      if (e.type != DT_DIR || depth >= 64) continue;
      // A git directory's objects are many and carry no commands.
      if (git && (e.name == "objects" || e.name == "lfs")) continue;
      if (std::find(skip_.begin(), skip_.end(), child) != skip_.end()) continue;
      const int sub = ::openat(fd, e.name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub < 0) continue;
      visit(sub, child, e.name, depth + 1);
      ::close(sub);
    }
  }

  const std::vector<std::string>& skip_;
  workspace_limits limits_;
  clock::time_point deadline_;
  std::size_t seen_ = 0;
};

// Every root walked by one walker, within one bound for them all.
tree_walker walked(const std::vector<std::string>& roots, const std::vector<std::string>& skip,
                   const workspace_limits& limits) {
  tree_walker w(skip, limits);
  for (const auto& root : roots) w.walk(root);
  return w;
}

}  // namespace

workspace_guard::workspace_guard(std::vector<std::string> roots,
                                 std::vector<std::string> workspaces, std::vector<std::string> skip,
                                 workspace_limits limits)
    : roots_(std::move(roots)),
      workspaces_(std::move(workspaces)),
      skip_(std::move(skip)),
      limits_(limits) {
  const tree_walker w = walked(roots_, skip_, limits_);
  if (!w.complete)
    warnings_.push_back(
        "the places the session writes through hold too many files to look at "
        "within the bound; a git directory or agent file past it is not guarded");
  std::size_t budget = limits_.total_bytes;
  const auto hold = [&](const std::string& path) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0) read_only_.push_back(path);
  };
  for (const auto& g : w.found.git_dirs) {
    git_dir d;
    d.path = g.path;
    d.dev = g.dev;
    d.ino = g.ino;
    for (auto [name, file] :
         {std::pair{"config", &d.config}, std::pair{"config.worktree", &d.config_worktree},
          std::pair{"commondir", &d.commondir}})
      if (!save_file(g.path + "/" + name, *file, limits_.file_bytes, budget))
        hold(g.path + "/" + name);
    for (auto [name, tree] : {std::pair{"hooks", &d.hooks}, std::pair{"info", &d.info}})
      if (!save_tree(g.path + "/" + name, *tree, limits_.file_bytes, budget))
        hold(g.path + "/" + name);
    git_dirs_.push_back(std::move(d));
  }
  for (const auto& path : w.found.gitfiles) {
    saved_file f;
    if (save_file(path, f, limits_.file_bytes, budget))
      gitfiles_.emplace_back(path, std::move(f));
    else
      hold(path);
  }
  for (const auto& [path, directory] : w.found.loaded) {
    loaded l;
    l.path = path;
    l.directory = directory;
    if (save_tree(path, l.tree, limits_.file_bytes, budget))
      loaded_.push_back(std::move(l));
    else
      hold(path);
  }
}

namespace {

// The entries of a configuration file as git reads them; an empty list for none, nullopt when
// git cannot read it.
std::optional<std::vector<git_entry>> entries_of_saved(const saved_file& f) {
  if (!f.exists) return std::vector<git_entry>{};
  if (!S_ISREG(f.mode)) return std::nullopt;
  char dir[] = "/tmp/broker-git-XXXXXX";
  if (!::mkdtemp(dir)) return std::nullopt;
  const std::string file = std::string(dir) + "/config";
  saved_file copy = f;
  copy.mode = S_IFREG | 0600;
  copy.uid = ::geteuid();
  copy.gid = ::getegid();
  std::optional<std::vector<git_entry>> out;
  if (put_back(file, copy)) out = read_git_config(file);
  ::unlink(file.c_str());
  ::rmdir(dir);
  return out;
}

// The entries in `a` that `b` lacks (as many times as they are missing).
std::vector<git_entry> minus(std::vector<git_entry> a, const std::vector<git_entry>& b) {
  for (const auto& e : b)
    if (auto it = std::find(a.begin(), a.end(), e); it != a.end()) a.erase(it);
  return a;
}

std::string keys_of(const std::vector<git_entry>& entries) {
  std::vector<std::string> keys;
  for (const auto& e : entries) add_unique(keys, e.key);
  std::string out;
  for (const auto& k : keys) out += (out.empty() ? "" : ", ") + k;
  return out;
}

}  // namespace

namespace {

void changes_for(const std::string& path, const saved_tree& before, std::size_t limit,
                 std::vector<change>& out) {
  auto more = changes_back(path, before, limit);
  out.insert(out.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
}

// The working tree holding `path`: the nearest directory above it with a `.git`; "" for none.
std::string worktree_of(const std::string& path) {
  for (fs::path dir = fs::path(path).parent_path(); dir.has_relative_path();
       dir = dir.parent_path()) {
    struct stat st {};
    if (::lstat((dir / ".git").c_str(), &st) == 0) return dir.string();
  }
  return {};
}

// The files tools load, as the session left them: what it made or changed there and git does
// not track is taken back.
void judge_loaded(const std::vector<workspace_guard::loaded>& before,
                  const std::vector<std::pair<std::string, bool>>& found, std::size_t limit,
                  restorer& host) {
  std::vector<change> changes;
  for (const auto& l : before) changes_for(l.path, l.tree, limit, changes);
  for (const auto& [path, directory] : found)
    if (std::none_of(before.begin(), before.end(), [&](const auto& l) { return l.path == path; }))
      changes_for(path, saved_tree{}, limit, changes);
  // Git's own view: a change to a file it tracks is in the diff the user reviews.
  std::map<std::string, std::vector<std::string>> by_worktree;
  for (const auto& c : changes)
    if (c.report)
      if (auto w = worktree_of(c.path); !w.empty())
        by_worktree[w].push_back(c.path.substr(w.size() + 1));
  std::set<std::string> tracked;
  for (const auto& [worktree, paths] : by_worktree)
    for (const auto& rel : git_tracked(worktree, paths)) tracked.insert(worktree + "/" + rel);
  for (const auto& c : changes)
    if (!tracked.count(c.path)) host.keep_out(c, "a file tools load with no review");
}

}  // namespace

void workspace_guard::judge(const std::string& kept_root, std::vector<kept_out>& kept,
                            std::vector<std::string>& warnings) const {
  const tree_walker w = walked(roots_, skip_, limits_);
  if (!w.complete)
    warnings.push_back(
        "the places the session wrote through hold too many files to look at "
        "within the bound; a git directory or agent file past it was not checked");
  restorer host(kept_root, kept, warnings);
  const auto non_data = [&](const std::vector<git_entry>& entries, const std::string& git) {
    std::vector<git_entry> out;
    for (const auto& e : entries)
      if (!git_data_entry(e, git, workspaces_)) out.push_back(e);
    return out;
  };
  const auto now_of = [&](const std::string& path) {
    saved_file now;
    std::size_t unlimited = ~std::size_t{0};
    if (!save_file(path, now, limits_.file_bytes, unlimited)) now.bytes = "\x01too large";
    return now;
  };
  // A configuration file of an existing git directory: data changes stay, anything else puts
  // the file back as it was.
  const auto judge_existing_config = [&](const std::string& path, const saved_file& before,
                                         const std::string& git) {
    const saved_file now = now_of(path);
    if (same_saved(before, now)) return;
    const auto was = entries_of_saved(before);
    const auto is = now.exists && S_ISREG(now.mode) ? read_git_config(path)
                                                    : std::optional<std::vector<git_entry>>{};
    std::string reason = "git configuration";
    if (was && is && before.exists == now.exists) {
      const auto added = non_data(minus(*is, *was), git);
      const auto removed = non_data(minus(*was, *is), git);
      if (added.empty() && removed.empty()) return;  // remotes, branches, user: data
      reason += " (" + keys_of(added.empty() ? removed : added) + ")";
    }
    host.keep_out(change{path, before}, reason);
  };
  // In a git directory the session made: its config keeps its data entries only.
  const auto judge_new_config = [&](const std::string& path, const std::string& git) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) < 0) return;
    const auto is = S_ISREG(st.st_mode) ? read_git_config(path) : std::nullopt;
    if (is && non_data(*is, git).empty()) return;
    host.keep_out(change{path, {}}, is ? "git configuration (" + keys_of(non_data(*is, git)) + ")"
                                       : "git configuration git cannot read");
    if (!is) return;
    std::vector<git_entry> data;
    for (const auto& e : *is)
      if (git_data_entry(e, git, workspaces_)) data.push_back(e);
    if (!write_git_config(path, data)) warnings.push_back("could not write " + path + " again");
  };
  for (const auto& g : w.found.git_dirs) {
    const auto was = std::find_if(git_dirs_.begin(), git_dirs_.end(), [&](const git_dir& d) {
      return d.dev == g.dev && d.ino == g.ino;
    });
    if (was != git_dirs_.end()) {
      judge_existing_config(g.path + "/config", was->config, g.path);
      judge_existing_config(g.path + "/config.worktree", was->config_worktree, g.path);
      if (!same_saved(now_of(g.path + "/commondir"), was->commondir))
        host.keep_out(change{g.path + "/commondir", was->commondir}, "a git directory's commondir");
      host.keep_out(changes_back(g.path + "/hooks", was->hooks, limits_.file_bytes), "a git hook");
      host.keep_out(changes_back(g.path + "/info", was->info, limits_.file_bytes),
                    "a git directory's info");
      continue;
    }
    judge_new_config(g.path + "/config", g.path);
    judge_new_config(g.path + "/config.worktree", g.path);
    // Its hooks: git's samples (which never run) stay, anything else is kept out.
    const std::string hooks = g.path + "/hooks";
    if (const int fd = ::open(hooks.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        fd >= 0) {
      for (const auto& e : dir_entries(fd))
        if (!(e.type == DT_REG && e.name.ends_with(".sample")))
          host.keep_out(change{hooks + "/" + e.name, {}}, "a git hook");
      ::close(fd);
    } else if (struct stat st{}; ::lstat(hooks.c_str(), &st) == 0) {
      host.keep_out(change{hooks, {}}, "a git hook");
    }
  }
  for (const auto& [path, before] : gitfiles_) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) continue;  // a git dir, judged
    if (!same_saved(now_of(path), before)) host.keep_out(change{path, before}, "a gitfile");
  }
  judge_loaded(loaded_, w.found.loaded, limits_.file_bytes, host);
}

}  // namespace broker::sandbox
