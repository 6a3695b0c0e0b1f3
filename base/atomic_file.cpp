#include "base/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <system_error>
#include <utility>

#include <openssl/rand.h>

namespace broker::base {

namespace {

namespace fs = std::filesystem;

std::string errno_text() {
  return std::error_code(errno, std::generic_category()).message();
}

// Unpredictable, so another user sharing the directory cannot pre-create the temp name.
std::string random_suffix() {
  std::array<unsigned char, 8> bytes{};
  if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1)
    throw file_error("cannot draw a random temp file name");
  std::string hex;
  for (unsigned char b : bytes) {
    std::array<char, 3> two{};
    std::snprintf(two.data(), two.size(), "%02x", b);
    hex += two.data();
  }
  return hex;
}

// Owns the open temp file until it has been renamed into place.
struct temp_file {
  fs::path path;
  int fd = -1;
  bool renamed = false;
  temp_file() = default;
  temp_file(temp_file&& other) noexcept
      : path(std::exchange(other.path, {})),
        fd(std::exchange(other.fd, -1)),
        renamed(other.renamed) {}
  temp_file& operator=(temp_file&&) = delete;
  ~temp_file() {
    if (fd >= 0) ::close(fd);
    if (!path.empty() && !renamed) ::unlink(path.c_str());
  }
};

void write_all(int fd, std::string_view bytes, const fs::path& file) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw file_error("cannot write " + file.string() + ": " + errno_text());
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
}

// The rename is only durable once the directory entry is; a failure here loses no data.
void sync_directory(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

// `bytes` in a new temp file next to `file` (exactly `mode`, synced when asked), closed.
temp_file written_temp(const fs::path& file, std::string_view bytes, mode_t mode,
                       durability lasting) {
  const fs::path dir = file.has_parent_path() ? file.parent_path() : fs::path(".");
  temp_file temp;
  for (int attempt = 0; temp.fd < 0; ++attempt) {
    temp.path = dir / ("." + file.filename().string() + ".tmp-" + random_suffix());
    temp.fd = ::open(temp.path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (temp.fd >= 0) break;
    const bool retry = errno == EEXIST && attempt < 8;
    const std::string reason = errno_text();
    temp.path.clear();  // not ours: never unlink it
    if (!retry) throw file_error("cannot create a temp file for " + file.string() + ": " + reason);
  }
  // open(2) applies the umask; the mode is part of the contract (0600 key, 0644 public files).
  if (::fchmod(temp.fd, mode) != 0)
    throw file_error("cannot set the mode of " + file.string() + ": " + errno_text());
  write_all(temp.fd, bytes, file);
  if (lasting == durability::synced && ::fsync(temp.fd) != 0)
    throw file_error("cannot sync " + file.string() + ": " + errno_text());
  const int fd = temp.fd;
  temp.fd = -1;
  if (::close(fd) != 0) throw file_error("cannot write " + file.string() + ": " + errno_text());
  return temp;
}

fs::path directory_of(const fs::path& file) {
  return file.has_parent_path() ? file.parent_path() : fs::path(".");
}

}  // namespace

void write_file_atomically(const fs::path& file, std::string_view bytes, mode_t mode,
                           durability lasting) {
  temp_file temp = written_temp(file, bytes, mode, lasting);
  if (::rename(temp.path.c_str(), file.c_str()) != 0)
    throw file_error("cannot replace " + file.string() + ": " + errno_text());
  temp.renamed = true;
  if (lasting == durability::synced) sync_directory(directory_of(file));
}

bool create_file_once(const fs::path& file, std::string_view bytes, mode_t mode) {
  temp_file temp = written_temp(file, bytes, mode, durability::synced);
  // link(2) never replaces a file: of two processes making `file` at once, one wins.
  if (::link(temp.path.c_str(), file.c_str()) != 0) {
    if (errno == EEXIST) return false;
    throw file_error("cannot create " + file.string() + ": " + errno_text());
  }
  sync_directory(directory_of(file));
  return true;
}

}  // namespace broker::base
