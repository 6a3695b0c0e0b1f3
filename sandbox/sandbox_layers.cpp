#include "sandbox/sandbox_layers.hpp"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "sandbox/path_lists.hpp"
#include "sandbox/sandbox_mounts.hpp"

namespace broker::sandbox {

namespace {

std::string unescape(std::string_view field) {
  std::string out;
  for (std::size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size() &&
        field.substr(i + 1, 3).find_first_not_of("01234567") == std::string_view::npos) {
      out += static_cast<char>((field[i + 1] - '0') * 64 + (field[i + 2] - '0') * 8 +
                               (field[i + 3] - '0'));
      i += 3;
    } else {
      out += field[i];
    }
  }
  return out;
}

// The flags a bind remount must carry over: in a user namespace those the host set are locked.
unsigned long kept_flags(int control, const std::string& path, bool fail_unreachable) {
  struct statvfs vfs {};
  if (::statvfs(path.c_str(), &vfs) < 0) {
    if (!fail_unreachable) return ~0UL;
    sandbox_fail(control, "reading the flags of " + path);
  }
  unsigned long flags = 0;
  for (auto [have, set] :
       {std::pair{ST_NOSUID, MS_NOSUID}, std::pair{ST_NODEV, MS_NODEV},
        std::pair{ST_NOEXEC, MS_NOEXEC}, std::pair{ST_NOATIME, MS_NOATIME},
        std::pair{ST_NODIRATIME, MS_NODIRATIME}, std::pair{ST_RELATIME, MS_RELATIME}})
    if (vfs.f_flag & have) flags |= set;
  if (vfs.f_flag & ST_RDONLY) flags |= MS_RDONLY;
  return flags;
}

std::string layer_fd_path(int fd) {
  return "/proc/self/fd/" + std::to_string(fd);
}

}  // namespace

std::vector<host_mount> parse_mountinfo(std::string_view text) {
  std::vector<host_mount> out;
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    // id parent major:minor root mount-point options ...
    std::vector<std::string_view> fields;
    for (std::size_t start = 0; start < line.size() && fields.size() < 6;) {
      std::size_t space = line.find(' ', start);
      if (space == std::string_view::npos) space = line.size();
      fields.push_back(line.substr(start, space - start));
      start = space + 1;
    }
    if (fields.size() < 6) continue;
    host_mount m{unescape(fields[4]), false};
    for (std::size_t start = 0; start <= fields[5].size();) {
      std::size_t comma = fields[5].find(',', start);
      if (comma == std::string_view::npos) comma = fields[5].size();
      if (fields[5].substr(start, comma - start) == "ro") m.read_only = true;
      start = comma + 1;
    }
    out.push_back(std::move(m));
  }
  return out;
}

std::vector<host_mount> read_host_mounts(int control) {
  const int fd = ::open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
  if (fd < 0) sandbox_fail(control, "reading /proc/self/mountinfo");
  std::string text;
  char chunk[16 * 1024];
  for (;;) {
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) sandbox_fail(control, "reading /proc/self/mountinfo");
    if (n == 0) break;
    text.append(chunk, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return parse_mountinfo(text);
}

void make_host_read_only(int control, const std::vector<host_mount>& mounts) {
  for (const auto& m : mounts) {
    if (m.read_only || within(m.path, "/proc") || within(m.path, "/dev")) continue;
    const unsigned long flags = kept_flags(control, m.path, false);
    if (flags == ~0UL || (flags & MS_RDONLY)) continue;  // out of reach, or read-only already
    if (::mount(nullptr, m.path.c_str(), nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY | flags,
                nullptr) < 0)
      sandbox_fail(control, "making " + m.path + " read-only");
  }
}

void make_writable_again(int control, const std::string& path,
                         const std::vector<host_mount>& host) {
  // The mount the place was bound from: the deepest of the host's at or above it.
  const host_mount* source = nullptr;
  for (const auto& m : host)
    if (within(path, m.path) && (!source || m.path.size() >= source->path.size())) source = &m;
  const auto writable = [&](const std::string& at) {
    const unsigned long flags = kept_flags(control, at, true) & ~MS_RDONLY;
    if (::mount(nullptr, at.c_str(), nullptr, MS_BIND | MS_REMOUNT | flags, nullptr) < 0)
      sandbox_fail(control, "making " + at + " writable");
  };
  if (source && !source->read_only) writable(path);
  for (const auto& m : host)
    if (m.path != path && within(m.path, path) && !m.read_only) writable(m.path);
}

layer_maker::layer_maker(int control, std::uint64_t bytes) : control_(control) {
  const int fs = ::fsopen("tmpfs", FSOPEN_CLOEXEC);
  if (fs < 0) sandbox_fail(control, "making the session's layer");
  const std::string size = std::to_string(bytes);
  if (::fsconfig(fs, FSCONFIG_SET_STRING, "size", size.c_str(), 0) < 0 ||
      ::fsconfig(fs, FSCONFIG_SET_STRING, "mode", "0700", 0) < 0 ||
      ::fsconfig(fs, FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) < 0)
    sandbox_fail(control, "making the session's layer");
  upper_ = ::fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
  ::close(fs);
  if (upper_ < 0) sandbox_fail(control, "making the session's layer");
}

layer_maker::~layer_maker() {
  if (upper_ >= 0) ::close(upper_);
}

int layer_maker::take_upper() {
  return std::exchange(upper_, -1);
}

namespace {

// The directories from `lower` down to `rel`'s parent made in `upper` as the lower layer has
// them (mode and owner: a merged directory shows its upper one's). Returns the parent's
// descriptor in `upper`, or -1.
int make_upper_parents(int lower, int upper, const std::string& rel) {
  int up = ::dup(upper), low = ::dup(lower);
  for (std::size_t start = 0;;) {
    const std::size_t slash = rel.find('/', start);
    if (slash == std::string::npos) break;
    const std::string name = rel.substr(start, slash - start);
    start = slash + 1;
    struct stat st {};
    const int next_low =
        low < 0 ? -1 : ::openat(low, name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    const bool exists = next_low >= 0 && ::fstat(next_low, &st) == 0;
    if (::mkdirat(up, name.c_str(), exists ? (st.st_mode & 07777) : 0755) == 0 && exists)
      (void)::fchownat(up, name.c_str(), st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW);
    const int next_up = ::openat(up, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    ::close(up);
    if (low >= 0) ::close(low);
    up = next_up;
    low = next_low;
    if (up < 0) break;
  }
  if (low >= 0) ::close(low);
  return up;
}

// `source`'s bytes into a new file `name` in `dir` (0600).
bool copy_into(int source, int dir, const std::string& name) {
  const int out =
      ::openat(dir, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (out < 0) return false;
  char chunk[64 * 1024];
  bool ok = true;
  for (off_t at = 0; ok;) {
    const ssize_t n = ::pread(source, chunk, sizeof chunk, at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ok = n == 0;
      break;
    }
    for (ssize_t done = 0; ok && done < n;) {
      const ssize_t w = ::write(out, chunk + done, static_cast<std::size_t>(n - done));
      ok = w > 0;
      if (ok) done += w;
    }
    at += n;
  }
  ::close(out);
  return ok;
}

}  // namespace

bool layer_maker::mount(std::size_t index, int lower, const std::string& target,
                        const std::vector<open_seed>& seeds) {
  const std::string n = std::to_string(index);
  if (::mkdirat(upper_, n.c_str(), 0700) < 0 || ::mkdirat(upper_, (n + "/u").c_str(), 0755) < 0 ||
      ::mkdirat(upper_, (n + "/w").c_str(), 0700) < 0)
    sandbox_fail(control_, "making a layer for " + target);
  const int up = ::openat(upper_, (n + "/u").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (up < 0) sandbox_fail(control_, "making a layer for " + target);
  struct stat top {};
  if (::fstat(lower, &top) == 0) {
    ::fchmod(up, top.st_mode & 07777);
    (void)::fchown(up, top.st_uid, top.st_gid);
  }
  for (const auto& seed : seeds) {
    if (!within(seed.target, target) || seed.target == target) continue;
    const std::string rel = seed.target.substr(target.size() + 1);
    const int parent = make_upper_parents(lower, up, rel);
    if (parent < 0) continue;
    const std::string name = rel.substr(rel.rfind('/') + 1);
    if (seed.source < 0)
      (void)::mknodat(parent, name.c_str(), S_IFCHR | 0600, makedev(0, 0));  // a whiteout
    else if (!copy_into(seed.source, parent, name))
      sandbox_fail(control_, "placing " + seed.target + " in its layer");
    ::close(parent);
  }
  ::close(up);
  // No metadata-only copy-up (the upper files must hold their bytes, for the broker to read
  // them), no index, no redirects made or followed (renaming a directory of the host's gives
  // EXDEV, and programs copy instead); in a user namespace the overlay's own attributes are
  // user.* ones, with which the kernel takes no other redirect setting.
  std::string options = "lowerdir=" + layer_fd_path(lower) + ",upperdir=" + layer_fd_path(upper_) +
                        "/" + n + "/u,workdir=" + layer_fd_path(upper_) + "/" + n +
                        "/w,metacopy=off,index=off";
  options += ::geteuid() != 0 ? ",userxattr,redirect_dir=nofollow" : ",redirect_dir=off";
  return ::mount("overlay", target.c_str(), "overlay", MS_NOSUID | MS_NODEV, options.c_str()) == 0;
}

}  // namespace broker::sandbox
