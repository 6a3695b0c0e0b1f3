#include "brokers/real_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "brokers/secret_source.hpp"

namespace broker::brokers {

namespace {

std::string why(const std::string& path, const char* what, int err) {
  return path + ": " + what + ": " + std::strerror(err);
}

}  // namespace

std::optional<real_file> real_file::open(const std::string& path) {
  // O_NONBLOCK: a FIFO put where the file was must not hang the open; O_NOFOLLOW: a link put
  // there must not send a refreshed login elsewhere.
  constexpr int flags = O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
  bool writable = true;
  int fd = ::open(path.c_str(), O_RDWR | flags);
  if (fd < 0 && (errno == EACCES || errno == EROFS || errno == EPERM)) {
    writable = false;
    fd = ::open(path.c_str(), O_RDONLY | flags);
  }
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) return std::nullopt;
    if (err == ELOOP)
      throw source_error(path +
                         ": a symbolic link; a login file is read only as a regular file "
                         "(replace the link with the file it names)");
    throw source_error(why(path, "cannot open", err));
  }
  struct stat st {};
  if (::fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw source_error(path + ": not a regular file");
  }
  const int fl = ::fcntl(fd, F_GETFL);
  if (fl >= 0) ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  return real_file(path, fd, writable, st.st_dev, st.st_ino);
}

real_file::real_file(real_file&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      writable_(other.writable_),
      dev_(other.dev_),
      ino_(other.ino_) {}

real_file::~real_file() {
  if (fd_ >= 0) ::close(fd_);
}

base::secret real_file::read(std::size_t max_bytes) const {
  std::string buffer(max_bytes + 1, '\0');
  std::size_t used = 0;
  while (used < buffer.size()) {
    const ssize_t n =
        ::pread(fd_, buffer.data() + used, buffer.size() - used, static_cast<off_t>(used));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      base::wipe(buffer);
      throw source_error(why(path_, "cannot read", err));
    }
    if (n == 0) break;
    used += static_cast<std::size_t>(n);
  }
  if (used > max_bytes) {
    base::wipe(buffer);
    throw source_error(path_ + ": larger than " + std::to_string(max_bytes) + " bytes");
  }
  buffer.resize(used);
  return base::secret(std::move(buffer));
}

void real_file::write(std::string_view text) const {
  if (!writable_) throw source_error(path_ + ": not writable by the broker");
  std::lock_guard lock(write_mutex_);
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n =
        ::pwrite(fd_, text.data() + done, text.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw source_error(why(path_, "write failed", errno));
    done += static_cast<std::size_t>(n);
  }
  if (::ftruncate(fd_, static_cast<off_t>(text.size())) < 0 || ::fsync(fd_) < 0)
    throw source_error(why(path_, "write failed", errno));
}

bool real_file::at_path() const {
  struct stat st {};
  return ::lstat(path_.c_str(), &st) == 0 && st.st_dev == dev_ && st.st_ino == ino_;
}

}  // namespace broker::brokers
