#include "sandbox/kept.hpp"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

#include "sandbox/host_files.hpp"

namespace broker::sandbox {

namespace fs = std::filesystem;

namespace {

// A directory set aside entry by entry has at most this many in all.
constexpr std::size_t max_set_aside_entries = 100'000;

// A link from `from` to `to` (replacing one there), never followed: renamed within one file
// system, else made again with the same text and the old one removed.
bool move_link(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) == 0) return true;
  if (errno != EXDEV) return false;
  char text[4096];
  const ssize_t n = ::readlink(from.c_str(), text, sizeof text - 1);
  if (n < 0) return false;
  text[n] = '\0';
  ::unlink(to.c_str());
  if (::symlink(text, to.c_str()) < 0) return false;
  ::unlink(from.c_str());
  return true;
}

bool set_aside_counted(const std::string& from, const std::string& to, copy_budget& budget,
                       std::size_t& walked) {
  if (::rename(from.c_str(), to.c_str()) == 0) return true;
  struct stat st {};
  if (errno != EXDEV || ::lstat(from.c_str(), &st) < 0) return false;
  if (S_ISLNK(st.st_mode)) return move_link(from, to);
  if (S_ISDIR(st.st_mode)) {
    if (::mkdir(to.c_str(), 0700) < 0 && errno != EEXIST) return false;
    bool all = true;
    for (const std::string& name : directory_names(from))
      all &= ++walked <= max_set_aside_entries &&
             set_aside_counted(from + "/" + name, to + "/" + name, budget, walked);
    ::chmod(to.c_str(), st.st_mode & 0777);
    return all && ::rmdir(from.c_str()) == 0;
  }
  if (!S_ISREG(st.st_mode)) return false;
  copy_budget unbounded = budget;
  unbounded.file_bytes = unbounded.total_bytes = ~std::uint64_t{0};
  if (copy_file(from, to, unbounded) != copy_result::done) return false;
  ::unlink(from.c_str());
  return true;
}

}  // namespace

bool set_aside(const std::string& from, const std::string& to, copy_budget& budget) {
  std::size_t walked = 0;
  return set_aside_counted(from, to, budget, walked);
}

fs::path kept_path(const fs::path& kept_root, const fs::path& path) {
  return kept_root / path.lexically_normal().relative_path();
}

void take_kept(const fs::path& kept_root, const fs::path& path) {
  const fs::path from = kept_path(kept_root, path);
  struct stat st {};
  if (::lstat(from.c_str(), &st) < 0)
    throw std::runtime_error("nothing was kept out at " + path.string() + " in this session");
  struct stat there {};
  if (S_ISDIR(st.st_mode) && ::lstat(path.c_str(), &there) == 0)
    throw std::runtime_error(path.string() + " exists; the kept directory is " + from.string());
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (::rename(from.c_str(), path.c_str()) == 0) return;
  if (errno != EXDEV)
    throw std::runtime_error("cannot move " + from.string() + " to " + path.string() + ": " +
                             std::strerror(errno));
  // Another file system: copied (the user asked for it, whatever its size), then removed.
  fs::copy(from, path,
           fs::copy_options::recursive | fs::copy_options::overwrite_existing |
               fs::copy_options::copy_symlinks,
           ec);
  if (ec)
    throw std::runtime_error("cannot copy " + from.string() + " to " + path.string() + ": " +
                             ec.message());
  fs::remove_all(from, ec);
}

}  // namespace broker::sandbox
