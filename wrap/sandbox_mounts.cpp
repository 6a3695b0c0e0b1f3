#include "wrap/sandbox_mounts.hpp"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <utility>
#include <vector>

namespace broker::wrap {

namespace {

void add_ancestors(std::vector<std::string>& out, const std::string& path) {
  for (std::size_t slash = path.find('/', 1); slash != std::string::npos && slash + 1 < path.size();
       slash = path.find('/', slash + 1)) {
    std::string dir = path.substr(0, slash);
    if (std::find(out.begin(), out.end(), dir) == out.end()) out.push_back(std::move(dir));
  }
}

// `path` read-only in this mount namespace: bound onto itself, then remounted with MS_RDONLY
// added to the flags it has (in a user namespace the ones the host set are locked and must be
// kept). Missing paths are skipped.
void make_read_only(int control, const char* path) {
  struct stat st {};
  if (::stat(path, &st) < 0) return;
  if (::mount(path, path, nullptr, MS_BIND | MS_REC, nullptr) < 0)
    sandbox_fail(control, std::string("binding ") + path);
  struct statvfs vfs {};
  if (::statvfs(path, &vfs) < 0) sandbox_fail(control, std::string("reading the flags of ") + path);
  unsigned long flags = MS_BIND | MS_REMOUNT | MS_RDONLY;
  for (auto [have, set] :
       {std::pair{ST_NOSUID, MS_NOSUID}, std::pair{ST_NODEV, MS_NODEV},
        std::pair{ST_NOEXEC, MS_NOEXEC}, std::pair{ST_NOATIME, MS_NOATIME},
        std::pair{ST_NODIRATIME, MS_NODIRATIME}, std::pair{ST_RELATIME, MS_RELATIME}})
    if (vfs.f_flag & have) flags |= set;
  if (::mount(nullptr, path, nullptr, flags, nullptr) < 0)
    sandbox_fail(control, std::string("making ") + path + " read-only");
}

// `path` and its missing parents (0755) made, the last as a directory or an empty file: a place
// to mount on inside a fresh tmpfs.
void make_mount_point(int control, const std::string& path, bool directory) {
  for (std::size_t slash = path.find('/', 1); slash != std::string::npos;
       slash = path.find('/', slash + 1))
    if (::mkdir(path.substr(0, slash).c_str(), 0755) < 0 && errno != EEXIST)
      sandbox_fail(control, "making " + path.substr(0, slash));
  if (directory) {
    if (::mkdir(path.c_str(), 0755) < 0 && errno != EEXIST) sandbox_fail(control, "making " + path);
    return;
  }
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) sandbox_fail(control, "making " + path);
  ::close(fd);
}

// The host's IPC directories private and empty, and what the command needs from under them
// bound back (DESIGN §8.1). Kept paths are opened before anything covers them, and bound from
// the open descriptor.
void set_up_private_view(int control, const std::vector<view_step>& steps) {
  std::vector<int> kept(steps.size(), -1);
  for (std::size_t i = 0; i < steps.size(); ++i)
    if (steps[i].what == view_step::bind &&
        (kept[i] = ::open(steps[i].path.c_str(), O_PATH | O_CLOEXEC)) < 0)
      sandbox_fail(control, "opening " + steps[i].path);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const view_step& step = steps[i];
    if (step.what == view_step::empty) {
      make_mount_point(control, step.path, true);
      char options[32];
      std::snprintf(options, sizeof options, "mode=%o", step.mode);
      if (::mount("tmpfs", step.path.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, options) < 0)
        sandbox_fail(control, "making " + step.path + " private");
      continue;
    }
    struct stat st {};
    if (::fstat(kept[i], &st) < 0) sandbox_fail(control, "reading " + step.path);
    make_mount_point(control, step.path, S_ISDIR(st.st_mode));
    const std::string source = "/proc/self/fd/" + std::to_string(kept[i]);
    if (::mount(source.c_str(), step.path.c_str(), nullptr, MS_BIND | MS_REC, nullptr) < 0)
      sandbox_fail(control, "binding " + step.path + " through");
    ::close(kept[i]);
  }
}

// A session file (the resolver configuration that names the broker's DNS, the hosts file)
// over `target` under /etc, opened before the private view hid the session directory. A link
// into a directory the view emptied (systemd-resolved's /run/systemd/resolve/stub-resolv.conf)
// gets its file made in that tmpfs first; a missing file is left missing (without resolv.conf
// the C library asks 127.0.0.1, which is the broker's DNS too).
void show_session_file(int control, int copy, const std::string& target,
                       const std::vector<view_step>& view) {
  struct stat st {};
  if (::stat(target.c_str(), &st) < 0) {
    char link[4096];
    const ssize_t n = ::readlink(target.c_str(), link, sizeof link - 1);
    if (n <= 0) {
      ::close(copy);
      return;
    }
    std::string resolved(link, static_cast<std::size_t>(n));
    if (resolved.front() != '/') resolved = "/etc/" + resolved;
    const bool in_emptied = std::any_of(view.begin(), view.end(), [&](const view_step& step) {
      return step.what == view_step::empty && resolved.starts_with(step.path + "/");
    });
    if (!in_emptied || resolved.find("/../") != std::string::npos) {
      ::close(copy);
      return;
    }
    make_mount_point(control, resolved, false);
  }
  const std::string source = "/proc/self/fd/" + std::to_string(copy);
  if (::mount(source.c_str(), target.c_str(), nullptr, MS_BIND, nullptr) < 0)
    sandbox_fail(control, "showing the session's " + target);
  ::close(copy);
}

// Each directory bound onto itself, outermost first, with what is mounted below it kept
// (MS_REC; in a user namespace the host's mounts below are locked to it anyway).
// A directory that is a mount point already (a private directory's bind, a view's target
// later) needs no pin of its own.
void pin(int control, const std::vector<std::string>& directories,
         const std::vector<directory_view>& views) {
  for (const std::string& dir : directories) {
    if (std::any_of(views.begin(), views.end(), [&](const auto& v) { return v.target == dir; }))
      continue;
    struct statx st {};
    if (::statx(AT_FDCWD, dir.c_str(), 0, STATX_TYPE, &st) < 0 || !S_ISDIR(st.stx_mode)) continue;
    if ((st.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) &&
        (st.stx_attributes & STATX_ATTR_MOUNT_ROOT))
      continue;
    if (::mount(dir.c_str(), dir.c_str(), nullptr, MS_BIND | MS_REC, nullptr) < 0)
      sandbox_fail(control, "pinning " + dir);
  }
}

// The devices a program may need, from the host's /dev; nothing else of it (no block device,
// no kernel memory, no other user's terminal).
constexpr const char* passed_devices[] = {"null", "zero", "full", "random", "urandom", "tty"};

// A minimal private /dev (DESIGN §8.1): a tmpfs with the passed devices bound from the host's,
// a new devpts instance for the pseudo-terminals the command makes (tmux, script), the
// terminal it was started on as /dev/console (so that ttyname finds it), and the usual links.
// /dev/shm is the private view's.
void set_up_dev(int control) {
  std::vector<std::pair<int, std::string>> nodes;
  for (const char* name : passed_devices) {
    const std::string path = std::string("/dev/") + name;
    const int fd = ::open(path.c_str(), O_PATH | O_CLOEXEC);
    if (fd >= 0) nodes.emplace_back(fd, path);
  }
  // By its name in this namespace: the descriptor itself belongs to the broker's mounts, which
  // cannot be bound from here.
  for (int fd = 0; fd <= 2; ++fd) {
    char name[256];
    if (::ttyname_r(fd, name, sizeof name) != 0) continue;
    if (const int node = ::open(name, O_PATH | O_CLOEXEC); node >= 0)
      nodes.emplace_back(node, "/dev/console");
    break;
  }
  if (::mount("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k") < 0)
    sandbox_fail(control, "making a private /dev");
  for (const auto& [fd, path] : nodes) {
    make_mount_point(control, path, false);
    const std::string source = "/proc/self/fd/" + std::to_string(fd);
    if (::mount(source.c_str(), path.c_str(), nullptr, MS_BIND, nullptr) < 0)
      sandbox_fail(control, "binding " + path);
    ::close(fd);
  }
  make_mount_point(control, "/dev/shm", true);  // the private view's tmpfs goes there
  make_mount_point(control, "/dev/pts", true);
  if (::mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
              "newinstance,ptmxmode=0666,mode=0620") < 0)
    sandbox_fail(control, "mounting /dev/pts");
  for (auto [link, to] :
       {std::pair{"/dev/ptmx", "pts/ptmx"}, std::pair{"/dev/fd", "/proc/self/fd"},
        std::pair{"/dev/stdin", "/proc/self/fd/0"}, std::pair{"/dev/stdout", "/proc/self/fd/1"},
        std::pair{"/dev/stderr", "/proc/self/fd/2"}})
    if (::symlink(to, link) < 0) sandbox_fail(control, std::string("making ") + link);
  if (::mount(nullptr, "/dev", nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NOEXEC,
              nullptr) < 0)
    sandbox_fail(control, "making /dev read-only");
}

// `fd`'s path in this process, for a mount source or option.
std::string fd_path(int fd) {
  return "/proc/self/fd/" + std::to_string(fd);
}

// A view at its directory (directory_view.hpp): an overlay of the view over the real directory,
// or, where the kernel will not stack them (no overlay in this kernel or user namespace, a file
// system it cannot use), the view filled with copies and bound there. Closes the descriptors.
void show_view(int control, const directory_view& v, int real, int upper, int work) {
  // No metadata-only copy-up (the view's files must hold their bytes, for the broker to read
  // them back), no index, no redirects followed; in a user namespace the overlay's own
  // attributes are user.* ones, and the kernel takes no other redirect setting with those.
  std::string options = "lowerdir=" + fd_path(real) + ",upperdir=" + fd_path(upper) +
                        ",workdir=" + fd_path(work) + ",metacopy=off,index=off";
  options += ::geteuid() != 0 ? ",userxattr,redirect_dir=nofollow" : ",redirect_dir=off";
  if (::mount("overlay", v.target.c_str(), "overlay", MS_NOSUID | MS_NODEV, options.c_str()) < 0) {
    if (const std::string why = fill_view_copies(v, fd_path(real), fd_path(upper)); !why.empty())
      sandbox_fail(control, why);
    if (::mount(fd_path(upper).c_str(), v.target.c_str(), nullptr, MS_BIND, nullptr) < 0)
      sandbox_fail(control, "showing a view at " + v.target);
  }
  for (int fd : {real, upper, work}) ::close(fd);
}

}  // namespace

std::vector<std::string> pinned_directories(const launch_options& options) {
  std::vector<std::string> out;
  for (const auto& o : options.overlays) add_ancestors(out, o.target);
  for (const auto& v : options.views) add_ancestors(out, v.target);
  for (const auto& path : options.masks) add_ancestors(out, path);
  for (const auto& path : options.read_only) add_ancestors(out, path);
  for (const auto& path : options.scratch) add_ancestors(out, path);
  std::stable_sort(out.begin(), out.end(), [](const std::string& a, const std::string& b) {
    return std::count(a.begin(), a.end(), '/') < std::count(b.begin(), b.end(), '/');
  });
  return out;
}

// A fresh /proc shows this PID namespace only: not the broker's nor the user's shell's environ.
// Then the host's IPC directories become private, login files show their dummy copies, and the
// credential files are hidden: an empty read-only tmpfs over a directory, /dev/null over a file.
void set_up_mounts(int control, const launch_options& options) {
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) < 0)
    sandbox_fail(control, "making mounts private");
  if (::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) < 0)
    sandbox_fail(control, "mounting a fresh /proc");
  // Host-global kernel state stays out of a root child's reach (DESIGN §8.1): sysctls (a
  // core_pattern of "|program" would run as host root), SysRq, and sysfs.
  for (const char* path : {"/proc/sys", "/proc/sysrq-trigger", "/sys"})
    make_read_only(control, path);
  // The copies are in the session directory, which the private view covers: opened first.
  std::vector<int> copies;
  for (const auto& o : options.overlays) {
    copies.push_back(::open(o.copy.c_str(), O_PATH | O_CLOEXEC));
    if (copies.back() < 0) sandbox_fail(control, "opening " + o.copy);
  }
  // A view's real directory, its subdirectories and its files too large to copy are the real
  // ones, and its own directories may be in the host's /dev/shm: all opened before anything
  // covers them.
  struct view_fds {
    int real = -1, upper = -1, work = -1;
  };
  std::vector<view_fds> views;
  std::vector<std::vector<int>> subdirs(options.views.size());
  for (std::size_t i = 0; i < options.views.size(); ++i) {
    const directory_view& v = options.views[i];
    view_fds fds;
    fds.real = ::open(v.target.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    fds.upper = ::open(v.view.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    fds.work = ::open(v.work.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fds.real < 0) sandbox_fail(control, "opening " + v.target);
    if (fds.upper < 0 || fds.work < 0) sandbox_fail(control, "opening " + v.view);
    views.push_back(fds);
    for (const std::string& name : v.subdirs) {
      const std::string real = v.target + "/" + name;
      subdirs[i].push_back(::open(real.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (subdirs[i].back() < 0) sandbox_fail(control, "opening " + real);
    }
    for (const std::string& name : v.live_files) {
      const std::string real = v.target + "/" + name;
      subdirs[i].push_back(::open(real.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
      if (subdirs[i].back() < 0) sandbox_fail(control, "opening " + real);
    }
  }
  std::vector<std::pair<int, std::string>> etc_files;
  for (const auto& [copy, target] : options.etc_files) {
    etc_files.emplace_back(::open(copy.c_str(), O_PATH | O_CLOEXEC), target);
    if (etc_files.back().first < 0) sandbox_fail(control, "opening " + copy);
  }
  // The private /dev after everything is open: a view may live in the host's /dev/shm.
  set_up_dev(control);
  set_up_private_view(control, options.private_view);
  for (const auto& [fd, target] : etc_files)
    show_session_file(control, fd, target, options.private_view);
  pin(control, pinned_directories(options), options.views);
  auto bind = [&](int fd, const std::string& onto, const std::string& what) {
    const std::string source = "/proc/self/fd/" + std::to_string(fd);
    if (::mount(source.c_str(), onto.c_str(), nullptr, MS_BIND, nullptr) < 0)
      sandbox_fail(control, what + onto);
    ::close(fd);
  };
  // Views first, parents before children, then everything that lands on a path within them
  // (copies, masks, read-only paths): mounted earlier, it would sit under a view, unseen.
  for (std::size_t i = 0; i < views.size(); ++i) {
    const directory_view& v = options.views[i];
    show_view(control, v, views[i].real, views[i].upper, views[i].work);
    for (std::size_t j = 0; j < v.subdirs.size(); ++j)
      bind(subdirs[i][j], v.target + "/" + v.subdirs[j], "binding through ");
    for (std::size_t j = 0; j < v.live_files.size(); ++j)
      bind(subdirs[i][v.subdirs.size() + j], v.target + "/" + v.live_files[j], "binding through ");
  }
  for (std::size_t i = 0; i < copies.size(); ++i)
    bind(copies[i], options.overlays[i].target, "showing a copy at ");
  for (const std::string& path : options.masks) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) < 0) continue;  // nothing there to hide
    if (S_ISDIR(st.st_mode)) {
      if (::mount("tmpfs", path.c_str(), "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                  "size=4k,mode=0500") < 0)
        sandbox_fail(control, "masking " + path);
    } else {
      if (::mount("/dev/null", path.c_str(), nullptr, MS_BIND, nullptr) < 0)
        sandbox_fail(control, "masking " + path);
    }
  }
  for (const std::string& path : options.scratch)
    if (::mount("tmpfs", path.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "mode=0700") < 0)
      sandbox_fail(control, "a private directory at " + path);
  for (const std::string& path : options.read_only) make_read_only(control, path.c_str());
  // The working directory again, by its path: the one inherited is the directory under every
  // mount made above, and relative paths from it would pass beneath them all (a log directory
  // under it seen unmasked, a read-only path under it writable).
  char cwd[4096];
  if (::getcwd(cwd, sizeof cwd) == nullptr || ::chdir(cwd) < 0)
    sandbox_fail(control, "entering the working directory");
}

}  // namespace broker::wrap
