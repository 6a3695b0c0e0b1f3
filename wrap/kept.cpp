#include "wrap/kept.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace broker::wrap {

namespace fs = std::filesystem;

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

}  // namespace broker::wrap
