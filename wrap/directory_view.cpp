#include "wrap/directory_view.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>

#include "base/atomic_file.hpp"
#include "wrap/git_scan.hpp"
#include "wrap/home_guard.hpp"
#include "wrap/view_merge.hpp"

namespace broker::wrap {
namespace {

namespace fs = std::filesystem;

// A new directory the command made is walked at most this deep and this wide.
constexpr int max_tree_depth = 32;
constexpr std::size_t max_tree_entries = 100'000;

std::runtime_error failure(const std::string& what, const std::string& path) {
  return std::runtime_error(what + " " + path + ": " + std::strerror(errno));
}

// The entries of `dir` but "." and "..".
std::vector<std::string> entries(const std::string& dir) {
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), ::closedir);
  if (!d) throw failure("cannot read", dir);
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(d.get())) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

bool listed(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// Whether the view's file at `path` was made (copied up, or written new) no earlier than
// `changed`, the host file's last change (its ctime: a copy back sets the times it copies, not
// that one). False when the file system keeps no birth time.
bool made_after(const std::string& path, const timespec& changed) {
  struct statx st {};
  if (::statx(AT_FDCWD, path.c_str(), AT_SYMLINK_NOFOLLOW, STATX_BTIME, &st) < 0 ||
      !(st.stx_mask & STATX_BTIME))
    return false;
  return changed.tv_sec < st.stx_btime.tv_sec ||
         (changed.tv_sec == st.stx_btime.tv_sec &&
          changed.tv_nsec <= static_cast<long>(st.stx_btime.tv_nsec));
}

// What overlayfs leaves in its upper directory for a name removed from the view (and what a
// view starts with for a name that must stay hidden): a character device 0/0.
bool is_whiteout(const struct stat& st) {
  return S_ISCHR(st.st_mode) && st.st_rdev == 0;
}

// Files up to this size keep their bytes as copied in, to merge with; larger ones that both
// sides changed are kept out.
constexpr std::size_t max_merged_bytes = 4 << 20;

directory_view::copied::stat_id stat_id_of(const struct stat& st) {
  return {static_cast<unsigned long long>(st.st_dev), static_cast<unsigned long long>(st.st_ino),
          static_cast<long long>(st.st_size), st.st_mtim};
}

// A link from `from` to `to` (replacing one there), never followed: renamed within one file
// system, else made again with the same text and the old one removed.
bool move_link(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) == 0) return true;
  if (errno != EXDEV) return false;
  char text[4096];
  const ssize_t n = ::readlink(from.c_str(), text, sizeof text - 1);
  if (n < 0) return false;
  text[n] = '\0';
  const std::string temp = to + ".broker-link";
  ::unlink(temp.c_str());
  if (::symlink(text, temp.c_str()) < 0 || ::rename(temp.c_str(), to.c_str()) < 0) {
    ::unlink(temp.c_str());
    return false;
  }
  ::unlink(from.c_str());
  return true;
}

// Whether the real file at `real` is no longer the one copied in as `before`.
bool changed_since(const std::string& real, const directory_view::copied& before) {
  struct stat now {};
  return ::lstat(real.c_str(), &now) < 0 || !(stat_id_of(now) == before.real);
}

// A small regular file's bytes (never through a link, never blocking on a FIFO).
std::optional<std::string> read_small(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  std::optional<std::string> out;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
      static_cast<std::size_t>(st.st_size) <= max_merged_bytes) {
    std::string bytes(static_cast<std::size_t>(st.st_size), '\0');
    std::size_t got = 0;
    while (got < bytes.size()) {
      const ssize_t n =
          ::pread(fd, bytes.data() + got, bytes.size() - got, static_cast<off_t>(got));
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    bytes.resize(got);
    out = std::move(bytes);
  }
  ::close(fd);
  return out;
}

// Moving what a view holds back to the host, and setting aside what may not go.
class returner {
 public:
  returner(const std::string& kept_root, copy_budget& budget, const home_guard* guard,
           copy_back_result& out)
      : kept_root_(kept_root), budget_(budget), guard_(guard), out_(out) {}

  // Why `to` may not be reached by `from` (st: from's); "" when it may.
  std::string judged(const std::string& to, const struct stat& st) const {
    if (!guard_) return {};
    return guard_->kept_reason(to,
                               S_ISLNK(st.st_mode) || (S_ISREG(st.st_mode) && (st.st_mode & 0111)));
  }

  // `from` (in the view) is not to reach `to` (real): moved under the kept root, or an agent's
  // key store to where the next session finds it (home_guard::agent_store).
  void keep_out(const std::string& from, const std::string& to, std::string reason) {
    if (guard_ && guard_->discarded(to)) {
      std::error_code ec;
      fs::remove_all(from, ec);
      out_.kept.push_back({to, std::move(reason), ec ? from : std::string()});
      return;
    }
    const std::string store = guard_ ? guard_->agent_store(to) : std::string();
    std::string kept = store.empty() ? kept_root_ + to : store;
    std::error_code ec;
    fs::create_directories(fs::path(kept).parent_path(), ec);
    bool changed = false;
    if (!store.empty()) {
      const auto before = read_small(kept), now = read_small(from);
      changed = !before || !now || *before != *now;
      // Private like the rest of ~/.config/broker: every directory from there down.
      constexpr std::string_view config = "/.config/broker";
      const std::size_t at = kept.find(config);
      const std::size_t top = at == std::string::npos ? kept.size() : at + config.size();
      for (fs::path d = fs::path(kept).parent_path(); d.string().size() >= top; d = d.parent_path())
        ::chmod(d.c_str(), 0700);
      ::unlink(kept.c_str());  // the previous session's
    }
    if (ec || !set_aside(from, kept)) {
      kept = from;  // left where it is
      changed = true;
    } else if (!store.empty()) {
      ::chmod(kept.c_str(), 0600);
    }
    out_.kept.push_back({to, std::move(reason), std::move(kept), !store.empty(), changed});
  }

  // `from` moved to `kept`: a rename, or (the views on a memory file system, the kept ones on
  // disk) a regular file copied whatever its size, holes kept, within the session's time.
  bool set_aside(const std::string& from, const std::string& kept) {
    if (::rename(from.c_str(), kept.c_str()) == 0) return true;
    struct stat st {};
    if (errno != EXDEV || ::lstat(from.c_str(), &st) < 0) return false;
    if (S_ISLNK(st.st_mode)) return move_link(from, kept);
    if (S_ISDIR(st.st_mode)) {
      // Entry by entry, within the walk's bounds; the directory goes once it is empty.
      if (::mkdir(kept.c_str(), 0700) < 0 && errno != EEXIST) return false;
      bool all = true;
      for (const std::string& name : entries(from))
        all &= ++walked_ <= max_tree_entries && set_aside(from + "/" + name, kept + "/" + name);
      return all && ::rmdir(from.c_str()) == 0;
    }
    if (!S_ISREG(st.st_mode)) return false;
    copy_budget unbounded = budget_;
    unbounded.file_bytes = unbounded.total_bytes = ~std::uint64_t{0};
    if (copy_file(from, kept, unbounded) != copy_result::done) return false;
    ::unlink(from.c_str());
    return true;
  }

  // A regular file (or, with `link_ok`, a link) back, unless the rule or the budget says no.
  // Returns whether it went.
  bool file(const std::string& from, const std::string& to, const struct stat& st,
            bool link_ok = false, const directory_view::copied* before = nullptr) {
    if (std::string why = judged(to, st); !why.empty()) {
      keep_out(from, to, std::move(why));
      return false;
    }
    if (S_ISLNK(st.st_mode) && link_ok) {
      // Moved as it is, never followed: renamed, or made again with the same text.
      if (move_link(from, to)) return true;
      keep_out(from, to, "a link that could not be moved");
      return false;
    }
    if (!S_ISREG(st.st_mode)) {
      keep_out(from, to, "not a regular file");
      return false;
    }
    if (to.ends_with("/.git/config") || to.ends_with("/.git/config.worktree")) {
      // A repository made inside the session: its config may not name a command either.
      const auto text = read_small(from);
      if (!text || git_config_runs_commands(*text)) {
        keep_out(from, to, "git configuration");
        return false;
      }
    }
    const settings_file* settings = guard_ ? guard_->settings(to) : nullptr;
    struct stat there {};
    const bool taken = !before && ::lstat(to.c_str(), &there) == 0;  // made outside meanwhile
    if (settings || taken || (before && changed_since(to, *before)))
      return merged(from, to, st, settings, before);
    const copy_result r = move_file(from, to, budget_);
    if (r == copy_result::done) return true;
    keep_out(from, to, describe(r, budget_));
    return false;
  }

  // The view's file by content: merged with the host's when that changed since it was copied
  // in (`before`, when it was), an agent's commands kept as the host has them (`settings`).
  bool merged(const std::string& from, const std::string& to, const struct stat& st,
              const settings_file* settings, const directory_view::copied* before) {
    if (st.st_size > static_cast<off_t>(max_merged_bytes)) {
      keep_out(from, to, "too large to merge or check");
      return false;
    }
    std::optional<std::string> child = read_small(from), host = std::string();
    struct stat now {};
    const bool there = ::lstat(to.c_str(), &now) == 0;
    if (there) host = read_small(to);
    if (!child || !host) {
      keep_out(from, to, "not a regular file outside, or unreadable");
      return false;
    }
    std::string result = *child;
    if (!before && there && *child != *host) {
      // Made on both sides (two sessions' first runs): JSON objects merge, anything else
      // differing is the host's.
      const bool objects = child->starts_with('{') && host->starts_with('{');
      if (auto m = objects ? merge_three("{}", *host, *child) : std::nullopt)
        result = std::move(*m);
    } else if (before && changed_since(to, *before) && before->base && there &&
               !made_after(from, now.st_ctim)) {
      // Changed on the host after the command's copy was made: merged against the file at the
      // start. (A host change before the copy, which the overlay makes at the command's first
      // write, is in the command's version already: merged again, it would apply twice.)
      if (auto m = merge_three(*before->base, *host, *child)) result = std::move(*m);
    }
    // Otherwise the two cannot be merged, and this session's version goes, the last writer's,
    // as it would without the broker (an agent's commands still stay the host's, below).
    bool went = true;
    if (settings) {
      std::vector<std::string> changed;
      auto kept_commands = keep_host_commands(*settings, *host, result, changed);
      if (!kept_commands) {
        keep_out(from, to, "settings that cannot be read, so not checked");
        return false;
      }
      if (!changed.empty()) {
        std::string names;
        for (const auto& c : changed) names += (names.empty() ? "" : ", ") + c;
        keep_out(from, to, names);
        went = false;
      }
      result = std::move(*kept_commands);
    }
    if (!there || result != *host)
      base::write_file_atomically(to, result, st.st_mode & 0777, base::durability::synced);
    return went;
  }

  // A directory the command made: its regular files and directories go, the rest is kept out.
  void tree(const std::string& from, const std::string& to, const struct stat& dir_st, int depth) {
    if (std::string why = judged(to, dir_st); !why.empty()) {
      keep_out(from, to, std::move(why));
      return;
    }
    struct stat there {};
    const bool merging = ::lstat(to.c_str(), &there) == 0 && S_ISDIR(there.st_mode);
    if (!merging && ::mkdir(to.c_str(), dir_st.st_mode & 0777) < 0 &&
        !(errno == EEXIST && ::lstat(to.c_str(), &there) == 0 && S_ISDIR(there.st_mode))) {
      keep_out(from, to, "could not be made outside (" + std::string(std::strerror(errno)) + ")");
      return;
    }
    for (const std::string& name : entries(from)) {
      const std::string a = from + "/" + name, b = to + "/" + name;
      struct stat st {};
      if (::lstat(a.c_str(), &st) < 0 || is_whiteout(st)) continue;
      if (++walked_ > max_tree_entries || depth >= max_tree_depth) {
        keep_out(a, b,
                 "past the " + std::to_string(max_tree_entries) + " entries or " +
                     std::to_string(max_tree_depth) + " levels a new directory may have");
      } else if (S_ISDIR(st.st_mode)) {
        tree(a, b, st, depth + 1);
      } else {
        file(a, b, st);
      }
    }
  }

 private:
  const std::string& kept_root_;
  copy_budget& budget_;
  const home_guard* guard_;
  copy_back_result& out_;
  std::size_t walked_ = 0;
};

}  // namespace

directory_view make_directory_view(const view_plan& plan, copy_budget& budget) {
  directory_view v;
  v.view = plan.view;
  v.work = plan.view + ".work";
  v.target = plan.target;
  v.login_name = plan.login_name;
  v.hidden = plan.hidden;
  v.links_go_back = plan.links_go_back;
  struct stat dir_st {};
  if (::stat(v.target.c_str(), &dir_st) < 0) throw failure("cannot read", v.target);
  if (::mkdir(v.view.c_str(), dir_st.st_mode & 07777) < 0) throw failure("cannot make", v.view);
  if (::mkdir(v.work.c_str(), 0700) < 0) throw failure("cannot make", v.work);
  for (const std::string& name : entries(v.target)) {
    if (name == v.login_name || listed(v.hidden, name)) continue;
    const std::string from = v.target + "/" + name;
    struct stat st {};
    if (::lstat(from.c_str(), &st) < 0) continue;  // gone meanwhile
    if (S_ISDIR(st.st_mode)) {
      v.subdirs.push_back(name);
    } else if (S_ISREG(st.st_mode)) {
      if (static_cast<std::uint64_t>(st.st_size) > budget.file_bytes) {
        v.live_files.push_back(name);  // too large to copy: the real file itself, live
        continue;
      }
      std::shared_ptr<const std::string> base;
      if (!v.links_go_back && static_cast<std::size_t>(st.st_size) <= max_merged_bytes)
        if (auto bytes = read_small(from)) base = std::make_shared<const std::string>(*bytes);
      v.files.push_back(
          {name, static_cast<long long>(st.st_size), st.st_mtim, stat_id_of(st), std::move(base)});
    } else if (S_ISLNK(st.st_mode)) {
      v.links.push_back(name);
    }
    // Sockets and fifos the overlay shows as they are; a copy leaves them out.
  }
  // A masked name that does not exist yet, and the missing directories above deeper masked
  // paths, stay missing: the real directory is live below, and a credential file the user makes
  // there during the session (`npm login`, `aws configure`) would show through, where no mask
  // was mounted. A whiteout in the view shadows it.
  for (const auto* names : {&plan.hidden, &plan.absent})
    for (const std::string& name : *names) {
      struct stat st {};
      const std::string shut = v.view + "/" + name;
      if (::lstat((v.target + "/" + name).c_str(), &st) == 0 || ::lstat(shut.c_str(), &st) == 0)
        continue;
      if (::mknod(shut.c_str(), S_IFCHR | 0600, 0) < 0) throw failure("cannot make", shut);
    }
  if (!v.login_name.empty())
    base::write_file_atomically(v.view + "/" + v.login_name, plan.login_copy, 0600,
                                base::durability::session);
  return v;
}

std::string fill_view_copies(const directory_view& v, const std::string& real,
                             const std::string& view) {
  copy_budget budget = copy_budget::starting_now();
  // The whiteouts that keep names missing are an overlay's: bound as it is, the view would show
  // them as devices. A view of copies shows nothing the host makes later anyway.
  for (const std::string& name : entries(view)) {
    struct stat st {};
    if (::lstat((view + "/" + name).c_str(), &st) == 0 && is_whiteout(st))
      ::unlink((view + "/" + name).c_str());
  }
  const auto place = [&](const std::string& name, bool directory) {
    const std::string to = view + "/" + name;
    struct stat st {};
    if (::lstat(to.c_str(), &st) == 0) return true;  // made by the broker already
    if (directory) return ::mkdir(to.c_str(), 0700) == 0;
    const int fd = ::open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return false;
    ::close(fd);
    return true;
  };
  for (const std::string& name : v.subdirs)
    if (!place(name, true)) return "making a place for " + v.target + "/" + name;
  for (const std::string& name : v.live_files)
    if (!place(name, false)) return "making a place for " + v.target + "/" + name;
  for (const std::string& name : v.hidden) {
    struct stat st {};
    if (::lstat((real + "/" + name).c_str(), &st) == 0 && !place(name, S_ISDIR(st.st_mode)))
      return "making a place for " + v.target + "/" + name;
  }
  for (const auto& f : v.files) {
    const std::string to = view + "/" + f.name;
    struct stat st {};
    // A file that cannot be copied now (gone meanwhile, past the budget) is not shown.
    if (::lstat(to.c_str(), &st) < 0) (void)copy_file(real + "/" + f.name, to, budget);
  }
  for (const std::string& name : v.links) {
    std::error_code ec;
    const auto text = fs::read_symlink(real + "/" + name, ec);
    if (!ec) fs::create_symlink(text, view + "/" + name, ec);
  }
  return {};
}

copy_back_result copy_back(const directory_view& v, const std::string& kept_root,
                           copy_budget& budget, const home_guard* guard) {
  copy_back_result out;
  returner back(kept_root, budget, guard, out);
  for (const std::string& name : entries(v.view)) {
    if (name == v.login_name || listed(v.live_files, name) || listed(v.hidden, name)) continue;
    const std::string from = v.view + "/" + name, to = v.target + "/" + name;
    struct stat st {};
    if (::lstat(from.c_str(), &st) < 0) continue;
    // A name the command removed: the overlay's whiteout. What it removed stays on the host.
    if (is_whiteout(st)) continue;
    if (S_ISDIR(st.st_mode)) {
      // A bound subdirectory was the real one all along; a new one goes back whole, unless the
      // real directory got one of that name meanwhile.
      if (listed(v.subdirs, name)) continue;
      struct stat there {};
      if (::lstat(to.c_str(), &there) == 0 && !S_ISDIR(there.st_mode)) {
        back.keep_out(from, to, "its name was taken outside meanwhile");
        continue;
      }
      // (A directory made outside meanwhile too, e.g. by another session's first run, is
      // merged into: what is new on this side goes in, what both made is merged or kept out.)
      const std::size_t kept_before = out.kept.size();
      back.tree(from, to, st, 0);
      if (out.kept.size() == kept_before || ::access(to.c_str(), F_OK) == 0)
        out.copied.push_back(name + "/");
      continue;
    }
    if (S_ISLNK(st.st_mode) && listed(v.links, name)) {
      std::error_code ec;
      if (fs::read_symlink(from, ec) == fs::read_symlink(to, ec)) continue;  // as copied in
    }
    auto before =
        std::find_if(v.files.begin(), v.files.end(), [&](const auto& f) { return f.name == name; });
    if (S_ISREG(st.st_mode) && before != v.files.end() && before->size == st.st_size &&
        before->mtime.tv_sec == st.st_mtim.tv_sec && before->mtime.tv_nsec == st.st_mtim.tv_nsec)
      continue;  // as it was copied in
    if (back.file(from, to, st, v.links_go_back, before == v.files.end() ? nullptr : &*before))
      out.copied.push_back(name);
  }
  return out;
}

}  // namespace broker::wrap

namespace broker::wrap {

bool directory_view::copied::stat_id::operator==(const stat_id& o) const {
  return dev == o.dev && ino == o.ino && size == o.size && mtime.tv_sec == o.mtime.tv_sec &&
         mtime.tv_nsec == o.mtime.tv_nsec;
}

}  // namespace broker::wrap
