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
#include <stdexcept>

#include "certs/atomic_file.hpp"

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

// Moving what a view holds back to the host, and setting aside what may not go.
class returner {
 public:
  returner(const std::string& kept_root, copy_budget& budget, copy_back_result& out)
      : kept_root_(kept_root), budget_(budget), out_(out) {}

  // `from` (in the view) is not to reach `to` (real): moved under the kept root.
  void keep_out(const std::string& from, const std::string& to, std::string reason) {
    std::string kept = kept_root_ + to;
    std::error_code ec;
    fs::create_directories(fs::path(kept).parent_path(), ec);
    if (ec || ::rename(from.c_str(), kept.c_str()) < 0) kept = from;  // left where it is
    out_.kept.push_back({to, std::move(reason), std::move(kept)});
  }

  void file(const std::string& from, const std::string& to) {
    const copy_result r = move_file(from, to, budget_);
    if (r != copy_result::done) keep_out(from, to, describe(r, budget_));
  }

  // A directory the command made: its regular files and directories go, the rest is kept out.
  void tree(const std::string& from, const std::string& to, mode_t mode, int depth) {
    if (::mkdir(to.c_str(), mode & 0777) < 0) {
      keep_out(from, to, "could not be made outside (" + std::string(std::strerror(errno)) + ")");
      return;
    }
    for (const std::string& name : entries(from)) {
      const std::string a = from + "/" + name, b = to + "/" + name;
      struct stat st {};
      if (::lstat(a.c_str(), &st) < 0) continue;
      if (++walked_ > max_tree_entries || depth >= max_tree_depth) {
        keep_out(a, b, "past the " + std::to_string(max_tree_entries) + " entries or " +
                           std::to_string(max_tree_depth) + " levels a new directory may have");
      } else if (S_ISREG(st.st_mode)) {
        file(a, b);
      } else if (S_ISDIR(st.st_mode)) {
        tree(a, b, st.st_mode, depth + 1);
      } else {
        keep_out(a, b, "not a regular file");
      }
    }
  }

 private:
  const std::string& kept_root_;
  copy_budget& budget_;
  copy_back_result& out_;
  std::size_t walked_ = 0;
};

}  // namespace

directory_view make_directory_view(const std::string& login_file, const std::string& view_dir,
                                   std::string_view login_copy, copy_budget& budget) {
  const fs::path file(login_file);
  directory_view v;
  v.view = view_dir;
  v.target = file.parent_path().string();
  v.login_name = file.filename().string();
  struct stat dir_st {};
  if (::stat(v.target.c_str(), &dir_st) < 0) throw failure("cannot read", v.target);
  if (::mkdir(view_dir.c_str(), dir_st.st_mode & 07777) < 0) throw failure("cannot make", view_dir);
  for (const std::string& name : entries(v.target)) {
    if (name == v.login_name) continue;
    const std::string from = v.target + "/" + name, to = view_dir + "/" + name;
    struct stat st {};
    if (::lstat(from.c_str(), &st) < 0) continue;  // gone meanwhile
    if (S_ISDIR(st.st_mode)) {
      if (::mkdir(to.c_str(), st.st_mode & 07777) < 0) throw failure("cannot make", to);
      v.subdirs.push_back(name);
    } else if (S_ISREG(st.st_mode)) {
      if (copy_file(from, to, budget) == copy_result::done) {
        struct stat copied {};
        ::lstat(to.c_str(), &copied);
        v.files.push_back({name, static_cast<long long>(copied.st_size), copied.st_mtim});
        continue;
      }
      // Too large or too slow to copy: the real file itself, live (a place to bind it on).
      const int fd = ::open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
      if (fd < 0) throw failure("cannot make", to);
      ::close(fd);
      v.live_files.push_back(name);
    } else if (S_ISLNK(st.st_mode)) {
      std::error_code ec;
      const auto link = fs::read_symlink(from, ec);
      if (!ec) fs::create_symlink(link, to, ec);
      if (!ec) v.links.push_back(name);
    }
    // Sockets and fifos are left out: the view holds no live endpoint of the host's.
  }
  certs::write_file_atomically(view_dir + "/" + v.login_name, login_copy, 0600,
                               certs::durability::session);
  return v;
}

copy_back_result copy_back(const directory_view& v, const std::string& kept_root,
                           copy_budget& budget) {
  copy_back_result out;
  returner back(kept_root, budget, out);
  for (const std::string& name : entries(v.view)) {
    if (name == v.login_name || listed(v.live_files, name)) continue;
    const std::string from = v.view + "/" + name, to = v.target + "/" + name;
    struct stat st {};
    if (::lstat(from.c_str(), &st) < 0) continue;
    if (S_ISDIR(st.st_mode)) {
      // A bound subdirectory was the real one all along; a new one goes back whole, unless the
      // real directory got one of that name meanwhile.
      if (listed(v.subdirs, name)) continue;
      struct stat there {};
      if (::lstat(to.c_str(), &there) == 0) {
        back.keep_out(from, to, "its name was taken outside meanwhile");
        continue;
      }
      back.tree(from, to, st.st_mode, 0);
      out.copied.push_back(name + "/");
      continue;
    }
    if (S_ISLNK(st.st_mode) && listed(v.links, name)) {
      std::error_code ec;
      if (fs::read_symlink(from, ec) == fs::read_symlink(to, ec)) continue;  // as copied in
    }
    if (!S_ISREG(st.st_mode)) {
      back.keep_out(from, to, "not a regular file");
      continue;
    }
    auto before = std::find_if(v.files.begin(), v.files.end(),
                               [&](const auto& f) { return f.name == name; });
    if (before != v.files.end() && before->size == st.st_size &&
        before->mtime.tv_sec == st.st_mtim.tv_sec && before->mtime.tv_nsec == st.st_mtim.tv_nsec)
      continue;  // as it was copied in
    const std::size_t kept_before = out.kept.size();
    back.file(from, to);
    if (out.kept.size() == kept_before) out.copied.push_back(name);
  }
  return out;
}

}  // namespace broker::wrap
