#include "sandbox/bounded_copy.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <memory>
#include <random>

namespace broker::sandbox {

namespace {

constexpr std::size_t buffer_bytes = 256 * 1024;

struct fd_closer {
  int fd;
  ~fd_closer() {
    if (fd >= 0) ::close(fd);
  }
};

std::string mib(std::uint64_t bytes) {
  return std::to_string(bytes >> 20) + " MiB";
}

// A regular file opened for reading without following a link or blocking on a FIFO, or -1.
int open_regular(const std::string& path, struct stat& st, copy_result& why) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    why = errno == ELOOP ? copy_result::not_regular : copy_result::failed;
    return -1;
  }
  if (::fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
    why = copy_result::not_regular;
    ::close(fd);
    return -1;
  }
  return fd;
}

// The bytes of [at, end) from `in` to `out` at the same offsets.
copy_result copy_extent(int in, int out, off_t at, off_t end, copy_budget& budget, char* buffer) {
  while (at < end) {
    if (std::chrono::steady_clock::now() > budget.deadline) return copy_result::too_slow;
    const auto want = static_cast<std::size_t>(std::min<off_t>(end - at, buffer_bytes));
    if (want > budget.total_bytes) return copy_result::too_large;
    const ssize_t n = ::pread(in, buffer, want, at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n == 0 ? copy_result::done : copy_result::failed;  // cut short meanwhile
    for (ssize_t done = 0; done < n;) {
      const ssize_t w = ::pwrite(out, buffer + done, static_cast<std::size_t>(n - done), at + done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return copy_result::failed;
      done += w;
    }
    budget.total_bytes -= static_cast<std::uint64_t>(n);
    at += n;
  }
  return copy_result::done;
}

// Every data extent of `in` (size `size`) into `out`; holes stay holes.
copy_result copy_data(int in, int out, off_t size, copy_budget& budget) {
  auto buffer = std::make_unique<char[]>(buffer_bytes);
  for (off_t at = 0; at < size;) {
    off_t data = ::lseek(in, at, SEEK_DATA);
    if (data < 0) {
      if (errno == ENXIO) break;  // only a hole is left
      data = at;                  // SEEK_DATA unsupported: all of it is data
    }
    off_t hole = ::lseek(in, data, SEEK_HOLE);
    if (hole < 0) hole = size;
    if (const copy_result r =
            copy_extent(in, out, data, std::min(hole, size), budget, buffer.get());
        r != copy_result::done)
      return r;
    at = hole;
  }
  return ::ftruncate(out, size) == 0 ? copy_result::done : copy_result::failed;
}

// The regular file `from` into a new file `to` (O_EXCL, its mode), within `budget`, extent by
// extent. `source` gets the original's status; `to` is removed when the copy fails.
copy_result copy_new(const std::string& from, const std::string& to, copy_budget& budget,
                     struct stat& source) {
  copy_result why = copy_result::failed;
  const fd_closer in{open_regular(from, source, why)};
  if (in.fd < 0) return why;
  const auto size = static_cast<std::uint64_t>(source.st_size);
  if (size > budget.file_bytes) return copy_result::too_large;
  if (std::chrono::steady_clock::now() > budget.deadline) return copy_result::too_slow;
  const fd_closer out{
      ::open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)};
  if (out.fd < 0) return copy_result::failed;
  copy_result r = copy_data(in.fd, out.fd, source.st_size, budget);
  if (r == copy_result::done && ::fchmod(out.fd, source.st_mode & 0777) < 0)
    r = copy_result::failed;
  if (r != copy_result::done) ::unlink(to.c_str());
  return r;
}

std::string temp_beside(const std::string& to) {
  static thread_local std::mt19937_64 random{std::random_device{}()};
  char suffix[32];
  std::snprintf(suffix, sizeof suffix, ".broker-%016llx",
                static_cast<unsigned long long>(random()));
  return to + suffix;
}

}  // namespace

copy_budget copy_budget::starting_now(std::chrono::milliseconds time) {
  copy_budget b;
  b.deadline = std::chrono::steady_clock::now() + time;
  return b;
}

std::string describe(copy_result r, const copy_budget& budget) {
  switch (r) {
    case copy_result::done:
      return "copied";
    case copy_result::not_regular:
      return "not a regular file";
    case copy_result::too_large:
      return "larger than " + mib(budget.file_bytes) + " or past the session's copy allowance";
    case copy_result::too_slow:
      return "the session's time for copies ran out";
    case copy_result::failed:
      break;
  }
  return "could not be copied";
}

copy_result copy_file(const std::string& from, const std::string& to, copy_budget& budget) {
  const std::string temp = temp_beside(to);
  struct stat source {};
  copy_result r = copy_new(from, temp, budget, source);
  if (r != copy_result::done) return r;
  const timespec times[2] = {source.st_atim, source.st_mtim};
  if (::utimensat(AT_FDCWD, temp.c_str(), times, AT_SYMLINK_NOFOLLOW) < 0 ||
      ::rename(temp.c_str(), to.c_str()) < 0) {
    ::unlink(temp.c_str());
    return copy_result::failed;
  }
  return r;
}

}  // namespace broker::sandbox
