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

// A regular file's bytes, read without following a link; throws when it cannot be.
std::string read_regular(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) throw failure("cannot read", path);
  std::string bytes;
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      throw failure("cannot read", path);
    }
    if (n == 0) break;
    bytes.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return bytes;
}

}  // namespace

directory_view make_directory_view(const std::string& login_file, const std::string& view_dir,
                                   std::string_view login_copy) {
  const std::filesystem::path file(login_file);
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
      certs::write_file_atomically(to, read_regular(from), st.st_mode & 07777,
                                   certs::durability::session);
      const timespec times[2] = {st.st_atim, st.st_mtim};
      ::utimensat(AT_FDCWD, to.c_str(), times, AT_SYMLINK_NOFOLLOW);
      struct stat copied {};
      ::lstat(to.c_str(), &copied);
      v.files.push_back({name, static_cast<long long>(copied.st_size), copied.st_mtim});
    } else if (S_ISLNK(st.st_mode)) {
      std::error_code ec;
      const auto link = std::filesystem::read_symlink(from, ec);
      if (!ec) std::filesystem::create_symlink(link, to, ec);
    }
    // Sockets and fifos are left out: the view holds no live endpoint of the host's.
  }
  certs::write_file_atomically(view_dir + "/" + v.login_name, login_copy, 0600,
                               certs::durability::session);
  return v;
}

// A directory the command made in the view, copied into the real directory with its regular
// files and subdirectories (links and special files are left out); `to` must not exist.
void copy_tree(const std::string& from, const std::string& to, mode_t mode, int depth,
               std::vector<std::string>* skipped) {
  if (::mkdir(to.c_str(), mode) < 0) throw failure("cannot make", to);
  for (const std::string& name : entries(from)) {
    const std::string a = from + "/" + name, b = to + "/" + name;
    struct stat st {};
    if (::lstat(a.c_str(), &st) < 0) continue;
    if (S_ISREG(st.st_mode)) {
      certs::write_file_atomically(b, read_regular(a), st.st_mode & 07777);
    } else if (S_ISDIR(st.st_mode) && depth < 32) {
      copy_tree(a, b, st.st_mode & 07777, depth + 1, skipped);
    } else if (skipped) {
      skipped->push_back(a);
    }
  }
}

std::vector<std::string> copy_back(const directory_view& v, std::vector<std::string>* skipped) {
  std::vector<std::string> copied;
  for (const std::string& name : entries(v.view)) {
    if (name == v.login_name) continue;
    const std::string from = v.view + "/" + name;
    struct stat st {};
    if (::lstat(from.c_str(), &st) < 0) continue;
    if (S_ISDIR(st.st_mode)) {
      // A bound subdirectory was the real one all along; a new one goes back whole, unless the
      // real directory got one of that name meanwhile.
      if (std::find(v.subdirs.begin(), v.subdirs.end(), name) != v.subdirs.end()) continue;
      const std::string to = v.target + "/" + name;
      struct stat there {};
      if (::lstat(to.c_str(), &there) == 0) {
        if (skipped) skipped->push_back(name + "/");
        continue;
      }
      copy_tree(from, to, st.st_mode & 07777, 0, skipped);
      copied.push_back(name + "/");
      continue;
    }
    if (!S_ISREG(st.st_mode)) continue;
    auto before = std::find_if(v.files.begin(), v.files.end(),
                               [&](const auto& f) { return f.name == name; });
    if (before != v.files.end() && before->size == st.st_size &&
        before->mtime.tv_sec == st.st_mtim.tv_sec && before->mtime.tv_nsec == st.st_mtim.tv_nsec)
      continue;  // as it was copied in
    certs::write_file_atomically(v.target + "/" + name, read_regular(from), st.st_mode & 07777);
    copied.push_back(name);
  }
  return copied;
}

}  // namespace broker::wrap
