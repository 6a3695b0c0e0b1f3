#include "sandbox/layer_return.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>

#include "base/atomic_file.hpp"
#include "sandbox/file_merge.hpp"
#include "sandbox/host_files.hpp"
#include "sandbox/layer_plan.hpp"
#include "sandbox/path_lists.hpp"

namespace broker::sandbox {

namespace {

namespace fs = std::filesystem;

// An agent's data file is merged when it is at most this large; a settings file is read
// whole up to the larger bound (Claude Code's state file holds every project's history).
constexpr std::size_t max_merged_bytes = 4 << 20;
constexpr std::size_t max_settings_bytes = 32 << 20;
// A directory the session made is walked at most this deep and this wide.
constexpr int max_depth = 64;
constexpr std::size_t max_entries = 200'000;

// What overlayfs leaves in its upper directory for a name removed from the layer.
bool whiteout_at(const struct stat& st) {
  return S_ISCHR(st.st_mode) && st.st_rdev == 0;
}

// A directory the session removed and made again: the host's entries do not show in it.
bool is_opaque(const std::string& path) {
  char value[4] = {};
  const char* name = ::geteuid() == 0 ? "trusted.overlay.opaque" : "user.overlay.opaque";
  const ssize_t n = ::lgetxattr(path.c_str(), name, value, sizeof value);
  return n > 0 && value[0] == 'y';
}

bool same_mtime(const timespec& a, const timespec& b) {
  return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

// Whether the upper file at `path` was made (copied up, or written new) no earlier than
// `changed`, the host file's last change. False when the file system keeps no birth time.
bool made_after(const std::string& path, const timespec& changed) {
  struct statx st {};
  if (::statx(AT_FDCWD, path.c_str(), AT_SYMLINK_NOFOLLOW, STATX_BTIME, &st) < 0 ||
      !(st.stx_mask & STATX_BTIME))
    return false;
  return changed.tv_sec < st.stx_btime.tv_sec ||
         (changed.tv_sec == st.stx_btime.tv_sec &&
          changed.tv_nsec <= static_cast<long>(st.stx_btime.tv_nsec));
}

// Missing directories above `path` made as the session had them (modes from `upper`'s).
bool make_host_parents(const std::string& upper_root, const std::string& real_root,
                       const std::string& path) {
  const fs::path rel = fs::path(path.substr(real_root.size() + 1)).parent_path();
  std::string up = upper_root, real = real_root;
  for (const auto& part : rel) {
    up += "/" + part.string();
    real += "/" + part.string();
    struct stat st {};
    if (::lstat(real.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode)) return false;
      continue;
    }
    struct stat mode {};
    const mode_t m = ::lstat(up.c_str(), &mode) == 0 ? (mode.st_mode & 0777) : 0755;
    if (::mkdir(real.c_str(), m) < 0 && errno != EEXIST) return false;
  }
  return true;
}

class returner {
 public:
  returner(const layer_return_inputs& in, const std::string& kept_root, layers_returned& out)
      : in_(in), kept_root_(kept_root), out_(out) {}

  void layer(const std::string& upper_root, const std::string& real_root) {
    upper_root_ = upper_root;
    real_root_ = real_root;
    dir(upper_root, real_root, false, 0);
  }

 private:
  bool placed(const std::string& real) const {
    return std::find(in_.placed.begin(), in_.placed.end(), real) != in_.placed.end();
  }
  bool placed_below(const std::string& real) const {
    return std::any_of(in_.placed.begin(), in_.placed.end(),
                       [&](const std::string& p) { return p != real && within(p, real); });
  }

  // The upper directory `up`, at `real`; `fresh`: the session made it (the host's does not show).
  void dir(const std::string& up, const std::string& real, bool fresh, int depth) {
    for (const std::string& name : directory_names(up)) {
      const std::string u = up + "/" + name, r = real + "/" + name;
      struct stat st {};
      if (::lstat(u.c_str(), &st) < 0) continue;
      if (++walked_ > max_entries || depth > max_depth) {
        keep_out(u, r, "past what the end of a session looks at");
        continue;
      }
      if (whiteout_at(st)) {
        if (!placed(r)) removed(r);
        continue;
      }
      const home_rule* rule = in_.rules ? in_.rules->find(r) : nullptr;
      if (S_ISDIR(st.st_mode)) {
        struct stat there {};
        const bool host_has =
            !fresh && ::lstat(r.c_str(), &there) == 0 && S_ISDIR(there.st_mode) && !is_opaque(u);
        if (host_has) {
          dir(u, r, false, depth + 1);
        } else if (rule && rule->what == home_rule::through) {
          back_tree(u, r, depth + 1);
        } else if (rule && rule->what == home_rule::dropped) {
          drop(*rule);
        } else if ((in_.rules && in_.rules->any_below(r)) || placed_below(r)) {
          dir(u, r, true, depth + 1);  // some of it may go; what does not is kept out
        } else if (!directory_names(u).empty()) {
          keep_out(u, r, written_outside);
        }  // an empty directory carries nothing
        continue;
      }
      if (placed(r)) continue;  // a login file's copy, a stored key shown again
      if (rule) {
        switch (rule->what) {
          case home_rule::dropped:
            drop(*rule);
            continue;
          case home_rule::through:
            back_file(u, r, st);
            continue;
          case home_rule::settings:
            settings(u, r, *rule);
            continue;
          case home_rule::key_store:
            if (struct stat there{}; ::lstat(r.c_str(), &there) < 0 && S_ISREG(st.st_mode)) {
              store(u, r);
              continue;
            }
            break;
        }
      }
      if (!unchanged(u, st, r)) keep_out(u, r, written_outside);
    }
  }

  // A file the session opened for writing but did not change (the copy-up keeps its size,
  // times, mode, owner and bytes), or a link made again the same.
  bool unchanged(const std::string& u, const struct stat& st, const std::string& r) const {
    struct stat there {};
    if (::lstat(r.c_str(), &there) < 0) return false;
    if ((st.st_mode & S_IFMT) != (there.st_mode & S_IFMT)) return false;
    if (S_ISLNK(st.st_mode)) {
      std::error_code ec;
      return fs::read_symlink(u, ec) == fs::read_symlink(r, ec) && !ec;
    }
    if (!(S_ISREG(st.st_mode) && st.st_size == there.st_size && st.st_mode == there.st_mode &&
          st.st_uid == there.st_uid && st.st_gid == there.st_gid &&
          same_mtime(st.st_mtim, there.st_mtim)))
      return false;
    // Times are coarse (a clock tick): two writes of the same length within one tick (two
    // sessions appending to one history) look alike but for their bytes, compared where small.
    if (static_cast<std::size_t>(st.st_size) > max_merged_bytes) return true;
    const auto mine = read_regular_file(u, max_merged_bytes);
    return mine && mine == read_regular_file(r, max_merged_bytes);
  }

  void keep_out(const std::string& u, const std::string& r, std::string reason) {
    const fs::path to = kept_path(kept_root_, r);
    std::error_code ec;
    fs::create_directories(to.parent_path(), ec);
    struct stat st {};
    ::lstat(u.c_str(), &st);
    std::string kept = to.string();
    if (ec || !set_aside(u, kept, budget_)) {
      struct stat there {};
      if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode) && !S_ISLNK(st.st_mode))
        reason += "; not a regular file: not set aside";
      else if (::lstat(kept.c_str(), &there) == 0)
        reason += "; set aside in part";  // a directory whose copy ran out of time or room
      else
        reason += "; could not be set aside";
      if (::lstat(kept.c_str(), &there) < 0) kept.clear();
    }
    out_.kept.push_back({r, std::move(reason), std::move(kept)});
  }

  void removed(const std::string& r) {
    const home_rule* rule = in_.rules ? in_.rules->find(r) : nullptr;
    if (rule && rule->what == home_rule::dropped) return drop(*rule);
    if (rule && rule->what == home_rule::through) {
      // An agent's file it removed: gone from the host too, unless the host changed it since.
      const start_files::file* was = in_.started ? in_.started->find(r) : nullptr;
      struct stat now {};
      if (was && ::lstat(r.c_str(), &now) == 0 && S_ISREG(now.st_mode) && now.st_ino == was->ino &&
          now.st_size == was->size && same_mtime(now.st_mtim, was->mtime)) {
        ::unlink(r.c_str());
        out_.went.push_back(r);
      }
      return;
    }
    kept_out k{r, "removed in the session; yours is as it was", ""};
    k.what = kept_out::removed;
    out_.kept.push_back(std::move(k));
  }

  void drop(const home_rule& rule) {
    if (std::find(dropped_.begin(), dropped_.end(), rule.path) != dropped_.end()) return;
    dropped_.push_back(rule.path);
    kept_out k{rule.path, rule.why, ""};
    k.what = kept_out::dropped;
    out_.kept.push_back(std::move(k));
  }

  // A directory the session made where writes go through: made on the host, with what it holds.
  void back_tree(const std::string& u, const std::string& r, int depth) {
    struct stat there {
    }, st{};
    ::lstat(u.c_str(), &st);
    if (::lstat(r.c_str(), &there) == 0 && !S_ISDIR(there.st_mode)) {
      keep_out(u, r, "its name was taken outside meanwhile");
      return;
    }
    if (!make_host_parents(upper_root_, real_root_, r) ||
        (::mkdir(r.c_str(), st.st_mode & 0777) < 0 && errno != EEXIST)) {
      keep_out(u, r, "could not be made outside (" + std::string(std::strerror(errno)) + ")");
      return;
    }
    for (const std::string& name : directory_names(u)) {
      const std::string a = u + "/" + name, b = r + "/" + name;
      struct stat e {};
      if (::lstat(a.c_str(), &e) < 0 || whiteout_at(e)) continue;
      if (++walked_ > max_entries || depth > max_depth)
        keep_out(a, b, "past what the end of a session looks at");
      else if (S_ISDIR(e.st_mode))
        back_tree(a, b, depth + 1);
      else
        back_file(a, b, e);
    }
    out_.went.push_back(r + "/");
  }

  // An agent's data file, or a cache's, back to the host: as it is when the host's is as it was
  // at the start; merged with the host's when both changed it (two sessions of one agent at
  // once: JSON objects member by member, a log both appended to with both appends); when the
  // two cannot be merged the session's goes, the last writer's, as without broker.
  void back_file(const std::string& u, const std::string& r, const struct stat& st) {
    if (!S_ISREG(st.st_mode)) {
      keep_out(u, r, "not a regular file");
      return;
    }
    if (unchanged(u, st, r)) return;
    if (!make_host_parents(upper_root_, real_root_, r)) {
      keep_out(u, r, "its directory's name was taken outside meanwhile");
      return;
    }
    const start_files::file* was = in_.started ? in_.started->find(r) : nullptr;
    struct stat now {};
    const bool there = ::lstat(r.c_str(), &now) == 0;
    if (there && !S_ISREG(now.st_mode)) {
      keep_out(u, r, "its name was taken outside meanwhile");
      return;
    }
    const bool host_changed =
        there && (!was || now.st_ino != was->ino || now.st_size != was->size ||
                  !same_mtime(now.st_mtim, was->mtime));
    if (host_changed && !made_after(u, now.st_ctim)) {
      const auto child = read_regular_file(u, max_merged_bytes),
                 host = read_regular_file(r, max_merged_bytes);
      if (child && host) {
        std::optional<std::string> merged;
        if (was && was->bytes)
          merged = merge_three(*was->bytes, *host, *child);
        else if (!was && child->starts_with('{') && host->starts_with('{'))
          merged = merge_three("{}", *host, *child);  // made on both sides: JSON objects merge
        if (merged) {
          base::write_file_atomically(r, *merged, st.st_mode & 0777, base::durability::synced);
          out_.went.push_back(r);
          return;
        }
      }
    }
    const copy_result result = copy_file(u, r, budget_);
    if (result == copy_result::done)
      out_.went.push_back(r);
    else
      keep_out(u, r, describe(result, budget_));
  }

  // An agent's settings file: its data members go to the host's; if it changed anything else,
  // the session's file is set aside and named with those members.
  void settings(const std::string& u, const std::string& r, const home_rule& rule) {
    const auto session = read_regular_file(u, max_settings_bytes);
    if (!session) {
      keep_out(u, r, "settings too large or not a regular file, so not checked");
      return;
    }
    struct stat now {};
    const bool there = ::lstat(r.c_str(), &now) == 0;
    std::optional<std::string> host = std::string();
    if (there) host = read_regular_file(r, max_settings_bytes);
    const start_files::file* was = in_.started ? in_.started->find(r) : nullptr;
    if (!host || (was && !was->bytes)) {
      keep_out(u, r, "your settings file is too large or not a regular file, so not merged");
      return;
    }
    const auto merged =
        merge_settings(rule.format, {rule.data, in_.workspaces},
                       was ? std::string_view(*was->bytes) : std::string_view(), *host, *session);
    if (!merged.readable) {
      keep_out(u, r, "settings that cannot be read, so not checked");
      return;
    }
    if (merged.text) {
      struct stat mode {};
      ::lstat(u.c_str(), &mode);
      base::write_file_atomically(r, *merged.text, (there ? now.st_mode : mode.st_mode) & 0777,
                                  base::durability::synced);
      out_.went.push_back(r);
    }
    if (merged.kept.empty()) return;
    std::string names;
    for (const auto& k : merged.kept) names += (names.empty() ? "" : ", ") + k;
    keep_out(u, r, names);
  }

  // An agent's stored key (a dummy): kept in broker's own store for its next session, never in
  // the home.
  void store(const std::string& u, const std::string& r) {
    const auto now = read_regular_file(u, 1 << 20);
    if (!now) {
      keep_out(u, r, "not a regular file");
      return;
    }
    const std::string to = agent_store_path(in_.home, r);
    const auto before = read_regular_file(to, 1 << 20);
    std::error_code ec;
    fs::create_directories(fs::path(to).parent_path(), ec);
    // Private like the rest of ~/.config/broker: every directory from there down.
    const std::string top = in_.home + "/.config/broker";
    for (fs::path d = fs::path(to).parent_path(); within(d.string(), top); d = d.parent_path())
      ::chmod(d.c_str(), 0700);
    kept_out k{r,
               "an agent's stored key, a dummy: the agent outside broker would send it instead "
               "of your key; kept for broker's sessions",
               to};
    k.stored = true;
    k.store_changed = !before || *before != *now;
    try {
      base::write_file_atomically(to, *now, 0600, base::durability::synced);
    } catch (const std::exception& e) {
      out_.warnings.push_back(e.what());
      k.kept.clear();
    }
    out_.kept.push_back(std::move(k));
  }

  static constexpr const char* written_outside = "written outside the workspace";

  const layer_return_inputs& in_;
  const std::string& kept_root_;
  layers_returned& out_;
  std::string upper_root_, real_root_;
  copy_budget budget_ = copy_budget::starting_now();
  std::size_t walked_ = 0;
  std::vector<std::string> dropped_;
};

}  // namespace

start_files::start_files(const home_rules& rules) {
  for (const auto& rule : rules.all()) {
    if (rule.what != home_rule::settings && rule.what != home_rule::through) continue;
    struct stat st {};
    if (::lstat(rule.path.c_str(), &st) < 0 || !S_ISREG(st.st_mode)) continue;
    file f{rule.path, st.st_dev, st.st_ino, st.st_size, st.st_mtim, nullptr};
    const std::size_t limit =
        rule.what == home_rule::settings ? max_settings_bytes : max_merged_bytes;
    if (auto bytes = read_regular_file(rule.path, limit))
      f.bytes = std::make_shared<const std::string>(std::move(*bytes));
    files_.push_back(std::move(f));
  }
}

const start_files::file* start_files::find(const std::string& path) const {
  for (const auto& f : files_)
    if (f.path == path) return &f;
  return nullptr;
}

layers_returned return_layers(const layer_return_inputs& in, const std::string& kept_root) {
  layers_returned out;
  if (in.upper < 0) return out;
  returner back(in, kept_root, out);
  for (std::size_t i = 0; i < in.layers.size() && i < in.mounted.size(); ++i) {
    if (!in.mounted[i]) continue;
    const std::string upper =
        "/proc/self/fd/" + std::to_string(in.upper) + "/" + std::to_string(i) + "/u";
    try {
      back.layer(upper, in.layers[i]);
    } catch (const std::exception& e) {
      out.warnings.push_back("taking back what the session changed in " + in.layers[i] + ": " +
                             e.what());
    }
  }
  return out;
}

}  // namespace broker::sandbox
