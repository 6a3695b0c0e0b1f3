#include "sandbox/saved_files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <random>

#include "sandbox/host_files.hpp"
#include "sandbox/path_lists.hpp"

namespace broker::sandbox {

namespace fs = std::filesystem;

// What `path` is now. False when it is too large (or unreadable) to save within `budget`.
bool save_file(const std::string& path, saved_file& out, std::size_t limit, std::size_t& budget) {
  out = {};
  struct stat st {};
  if (::lstat(path.c_str(), &st) < 0) return true;  // none
  out.exists = true;
  out.mode = st.st_mode;
  out.uid = st.st_uid;
  out.gid = st.st_gid;
  if (S_ISLNK(st.st_mode)) {
    char text[4096];
    const ssize_t n = ::readlink(path.c_str(), text, sizeof text);
    if (n < 0 || n == sizeof text) return false;
    out.bytes.assign(text, static_cast<std::size_t>(n));
    return true;
  }
  if (!S_ISREG(st.st_mode)) return S_ISDIR(st.st_mode);
  if (static_cast<std::size_t>(st.st_size) > std::min(limit, budget)) return false;
  auto bytes = read_regular_file(path, limit);
  if (!bytes) return false;
  budget -= bytes->size();
  out.bytes = std::move(*bytes);
  return true;
}

namespace {

bool save_tree_at(const std::string& root, const std::string& rel, saved_tree& tree,
                  std::size_t limit, std::size_t& budget, int depth) {
  const std::string dir = rel.empty() ? root : root + "/" + rel;
  struct stat st {};
  if (::lstat(dir.c_str(), &st) < 0 || !S_ISDIR(st.st_mode)) return false;
  const auto names = directory_names(dir);
  if (names.size() > 10'000 || depth > 16) return false;
  for (const auto& name : names) {
    const std::string r = rel.empty() ? name : rel + "/" + name;
    saved_file f;
    if (!save_file(root + "/" + r, f, limit, budget)) return false;
    tree.entries.emplace_back(r, f);
    if (S_ISDIR(f.mode) && !save_tree_at(root, r, tree, limit, budget, depth + 1)) return false;
  }
  return true;
}

}  // namespace

// What the directory (or file) at `path` is now, whole. False when too large to save.
bool save_tree(const std::string& path, saved_tree& tree, std::size_t limit, std::size_t& budget) {
  tree = {};
  if (!save_file(path, tree.self, limit, budget)) return false;
  tree.exists = tree.self.exists;
  if (!tree.exists || !S_ISDIR(tree.self.mode)) return true;
  return save_tree_at(path, "", tree, limit, budget, 0);
}

bool same_saved(const saved_file& a, const saved_file& b) {
  if (a.exists != b.exists) return false;
  if (!a.exists) return true;
  return a.mode == b.mode && a.uid == b.uid && a.gid == b.gid && a.bytes == b.bytes;
}

namespace {

std::string restore_temp_name(const std::string& path) {
  static thread_local std::mt19937_64 random{std::random_device{}()};
  return path + ".broker-" + std::to_string(random() % 1'000'000'000'000ULL);
}

}  // namespace

bool put_back(const std::string& path, const saved_file& saved) {
  if (!saved.exists) return true;
  if (S_ISDIR(saved.mode)) {
    if (::mkdir(path.c_str(), saved.mode & 07777) < 0 && errno != EEXIST) return false;
    const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return false;
    ::fchmod(fd, saved.mode & 07777);
    if (::geteuid() == 0) (void)::fchown(fd, saved.uid, saved.gid);
    ::close(fd);
    return true;
  }
  const std::string temp = restore_temp_name(path);
  if (S_ISLNK(saved.mode)) {
    if (::symlink(saved.bytes.c_str(), temp.c_str()) < 0) return false;
    if (::geteuid() == 0) (void)::lchown(temp.c_str(), saved.uid, saved.gid);
  } else {
    const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return false;
    bool ok = true;
    for (std::size_t done = 0; ok && done < saved.bytes.size();) {
      const ssize_t n = ::write(fd, saved.bytes.data() + done, saved.bytes.size() - done);
      ok = n > 0;
      if (ok) done += static_cast<std::size_t>(n);
    }
    if (::geteuid() == 0) (void)::fchown(fd, saved.uid, saved.gid);
    ok = ok && ::fchmod(fd, saved.mode & 07777) == 0 && ::fsync(fd) == 0;
    ::close(fd);
    if (!ok) {
      ::unlink(temp.c_str());
      return false;
    }
  }
  if (::rename(temp.c_str(), path.c_str()) < 0) {
    ::unlink(temp.c_str());
    return false;
  }
  return true;
}

std::vector<change> changes_back(const std::string& path, const saved_tree& before,
                                 std::size_t limit) {
  saved_tree now;
  std::size_t unlimited = ~std::size_t{0};
  const bool readable = save_tree(path, now, limit, unlimited);
  std::vector<change> out;
  const bool before_dir = before.exists && S_ISDIR(before.self.mode);
  const bool now_dir = now.exists && S_ISDIR(now.self.mode);
  if (!(before_dir && now_dir && readable)) {
    if (!before.exists && !now.exists) return out;
    if (readable && !before_dir && !now_dir && same_saved(before.self, now.self)) return out;
    out.push_back({path, before.self});
    if (before_dir)
      for (const auto& [rel, f] : before.entries) out.push_back({path + "/" + rel, f, false});
    return out;
  }
  std::map<std::string, const saved_file*> was, is;
  for (const auto& [rel, f] : before.entries) was[rel] = &f;
  for (const auto& [rel, f] : now.entries) is[rel] = &f;
  std::vector<std::string> whole;  // set aside or put back whole: what is under them follows
  const auto under = [&](const std::string& rel) {
    return std::any_of(whole.begin(), whole.end(),
                       [&](const std::string& g) { return rel != g && within(rel, g); });
  };
  for (const auto& [rel, f] : now.entries) {
    if (under(rel)) continue;
    const auto it = was.find(rel);
    if (it == was.end()) {
      out.push_back({path + "/" + rel, {}});
      if (S_ISDIR(f.mode)) whole.push_back(rel);
    } else if (S_ISDIR(f.mode) && S_ISDIR(it->second->mode)) {
      if (!same_saved(*it->second, f)) out.push_back({path + "/" + rel, *it->second, false, true});
    } else if (!same_saved(*it->second, f)) {
      out.push_back({path + "/" + rel, *it->second});
      if (S_ISDIR(f.mode) || S_ISDIR(it->second->mode)) whole.push_back(rel);
    }
  }
  std::vector<std::string> restored;  // removed by the session: what was under them follows
  for (const auto& [rel, f] : before.entries) {
    const bool under_whole = under(rel);
    if (is.count(rel) && !under_whole) continue;
    const bool under_restored = std::any_of(restored.begin(), restored.end(), [&](const auto& r) {
      return rel != r && within(rel, r);
    });
    out.push_back({path + "/" + rel, f, !under_whole && !under_restored});
    if (!is.count(rel) && S_ISDIR(f.mode)) restored.push_back(rel);
  }
  if (!same_saved(before.self, now.self)) out.push_back({path, before.self, false, true});
  return out;
}

restorer::restorer(const std::string& kept_root, std::vector<kept_out>& kept,
                   std::vector<std::string>& warnings)
    : kept_root_(kept_root), kept_(kept), warnings_(warnings) {}

void restorer::keep_out(const change& c, const std::string& reason) {
  if (c.mode_only) {
    if (!put_back(c.path, c.before)) warnings_.push_back("could not put back " + c.path);
    return;
  }
  struct stat st {};
  const bool there = ::lstat(c.path.c_str(), &st) == 0;
  std::string where;
  if (there) {
    where = move_aside(c.path);
    if (where.empty()) return;
  }
  if (c.before.exists && !put_back(c.path, c.before))
    warnings_.push_back("could not put back " + c.path);
  if (!c.report) return;
  kept_out k{c.path, reason, where};
  if (!there) k.what = kept_out::removed;  // the session removed it; it is back
  kept_.push_back(std::move(k));
}

void restorer::keep_out(const std::vector<change>& changes, const std::string& reason) {
  for (const auto& c : changes) keep_out(c, reason);
}

std::string restorer::move_aside(const std::string& path) {
  const fs::path to = kept_path(kept_root_, path);
  std::error_code ec;
  fs::create_directories(to.parent_path(), ec);
  struct stat there {};
  if (!ec && ::lstat(to.c_str(), &there) == 0) fs::remove_all(to, ec);  // set aside before
  if (ec || !set_aside(path, to.string(), budget_)) {
    warnings_.push_back("could not set aside " + path);
    return {};
  }
  return to.string();
}

}  // namespace broker::sandbox
