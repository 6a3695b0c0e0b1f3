#include "session/session_dir.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <stdexcept>

#include "base/atomic_file.hpp"

namespace broker::session {

namespace {

// mkdir 0700, or an existing directory that is ours, not a link, and private.
void private_directory(const std::filesystem::path& dir) {
  if (::mkdir(dir.c_str(), 0700) == 0) return;
  struct stat st {};
  if (::lstat(dir.c_str(), &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() ||
      (st.st_mode & 077) != 0)
    throw std::runtime_error(dir.string() +
                             ": cannot make it, or it is not a private directory of this user");
}

}  // namespace

std::filesystem::path runtime_base() {
  const char* runtime = std::getenv("XDG_RUNTIME_DIR");
  if (runtime && *runtime == '/') return std::filesystem::path(runtime) / "broker";
  return "/tmp/broker-" + std::to_string(::geteuid());
}

session_dir::session_dir(const std::string& session_id) {
  const auto base = runtime_base();
  private_directory(base);
  path_ = base / session_id;
  private_directory(path_);
}

session_dir::~session_dir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

void session_dir::write_env_file(const std::filesystem::path& file, const std::string& content) {
  base::write_file_atomically(file, content, 0600);
  env_file_ = file;
}

}  // namespace broker::session
