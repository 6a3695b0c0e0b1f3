#include "sandbox/sandbox_mounts.hpp"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <memory>
#include <utility>
#include <vector>

#include "sandbox/path_lists.hpp"
#include "sandbox/sandbox_layers.hpp"

namespace broker::sandbox {

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

// The host's side of the view's steps and seeds, opened before anything covers them (the
// private /dev included: a kept path may be in the host's /dev/shm); each is then bound or
// layered from its descriptor. `owner`: for each seed, the deepest step holding it.
struct opened_steps {
  std::vector<int> steps;
  std::vector<open_seed> seeds;
  std::vector<std::size_t> owner;
};

opened_steps open_steps(int control, const launch_options& options) {
  const auto& steps = options.private_view;
  opened_steps out;
  out.steps.assign(steps.size(), -1);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].what == view_step::empty) continue;
    const int flags = steps[i].what == view_step::layer ? O_PATH | O_DIRECTORY : O_PATH;
    if ((out.steps[i] = ::open(steps[i].path.c_str(), flags | O_CLOEXEC)) < 0)
      sandbox_fail(control, "opening " + steps[i].path);
  }
  for (const auto& seed : options.seeds) {
    int source = -1;
    if (!seed.source.empty() && (source = ::open(seed.source.c_str(), O_RDONLY | O_CLOEXEC)) < 0)
      sandbox_fail(control, "opening " + seed.source);
    out.seeds.push_back({source, seed.target});
    std::size_t deepest = steps.size();
    for (std::size_t i = 0; i < steps.size(); ++i)
      if (within(seed.target, steps[i].path) && seed.target != steps[i].path) deepest = i;
    out.owner.push_back(deepest);
  }
  return out;
}

// The view's steps (private_dirs.hpp) in order: the host's IPC directories private and empty,
// what the command needs from under them bound back, the session's layers (each seed placed in
// the deepest layer holding it), and the places its writes go through to, bound in writable.
mounted_layers set_up_steps(int control, const launch_options& options, opened_steps& opened,
                            const std::vector<host_mount>& host) {
  const auto& steps = options.private_view;
  auto& seeds = opened.seeds;
  const auto& owner = opened.owner;
  mounted_layers out;
  std::vector<bool> layered(steps.size(), false);  // by step: a layer that was mounted
  std::unique_ptr<layer_maker> layers;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const view_step& step = steps[i];
    if (step.what == view_step::empty) {
      make_mount_point(control, step.path, true);
      char mode[32];
      std::snprintf(mode, sizeof mode, "mode=%o", step.mode);
      if (::mount("tmpfs", step.path.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, mode) < 0)
        sandbox_fail(control, "making " + step.path + " private");
      continue;
    }
    const int fd = opened.steps[i];
    struct stat st {};
    if (::fstat(fd, &st) < 0) sandbox_fail(control, "reading " + step.path);
    make_mount_point(control, step.path, S_ISDIR(st.st_mode));
    if (step.what == view_step::layer) {
      if (!layers) layers = std::make_unique<layer_maker>(control, options.layer_bytes);
      std::vector<open_seed> mine;
      for (std::size_t s = 0; s < seeds.size(); ++s)
        if (owner[s] == i) mine.push_back(seeds[s]);
      layered[i] = layers->mount(out.mounted.size(), fd, step.path, mine);
      out.mounted.push_back(layered[i]);
      ::close(fd);
      continue;
    }
    const std::string source = "/proc/self/fd/" + std::to_string(fd);
    if (::mount(source.c_str(), step.path.c_str(), nullptr, MS_BIND | MS_REC, nullptr) < 0)
      sandbox_fail(control, "binding " + step.path + " through");
    ::close(fd);
    if (step.what == view_step::through) make_writable_again(control, step.path, host);
  }
  // A login file's copy in no layer (or in one the kernel would not stack) is bound over it.
  for (std::size_t i = 0; i < seeds.size(); ++i) {
    const auto& seed = options.seeds[i];
    if (seeds[i].source < 0) continue;
    if (seed.bind_otherwise && !(owner[i] < steps.size() && layered[owner[i]])) {
      const std::string source = "/proc/self/fd/" + std::to_string(seeds[i].source);
      if (::mount(source.c_str(), seed.target.c_str(), nullptr, MS_BIND, nullptr) < 0)
        sandbox_fail(control, "showing a copy at " + seed.target);
    }
    ::close(seeds[i].source);
  }
  if (layers) out.upper = layers->take_upper();
  return out;
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
// A directory that is a mount point already (a layer, a place bound through) needs no pin.
void pin(int control, const std::vector<std::string>& directories) {
  for (const std::string& dir : directories) {
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

// A minimal private /dev (docs/security-model.md): a tmpfs with the passed devices bound from the
// host's, a new devpts instance for the pseudo-terminals the command makes (tmux, script), the
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

}  // namespace

std::vector<std::string> pinned_directories(const launch_options& options) {
  std::vector<std::string> out;
  for (const auto& seed : options.seeds)
    if (seed.bind_otherwise) add_ancestors(out, seed.target);
  for (const auto& path : options.masks) add_ancestors(out, path);
  for (const auto& path : options.read_only) add_ancestors(out, path);
  for (const auto& path : options.scratch) add_ancestors(out, path);
  std::stable_sort(out.begin(), out.end(), [](const std::string& a, const std::string& b) {
    return std::count(a.begin(), a.end(), '/') < std::count(b.begin(), b.end(), '/');
  });
  return out;
}

// First the host's file system read-only (a mount namespace's copy of it: the host's own is
// untouched), then a fresh /proc: it shows this PID namespace only, not the broker's nor the
// user's shell's environ. Then the private /dev, the steps of the view (the private IPC
// directories, the layers, the places bound through), the session's files over /etc's, and last
// what sits on paths within them: login files' copies, masks over credential files (an empty
// read-only tmpfs over a directory, /dev/null over a file), scratch and read-only paths.
mounted_layers set_up_mounts(int control, const launch_options& options) {
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) < 0)
    sandbox_fail(control, "making mounts private");
  const std::vector<host_mount> host = read_host_mounts(control);
  // The session files are in the session directory, which the private view covers: opened
  // first, with the layers' and the bound places' host directories.
  std::vector<std::pair<int, std::string>> etc_files;
  for (const auto& [copy, target] : options.etc_files) {
    etc_files.emplace_back(::open(copy.c_str(), O_PATH | O_CLOEXEC), target);
    if (etc_files.back().first < 0) sandbox_fail(control, "opening " + copy);
  }
  opened_steps opened = open_steps(control, options);
  make_host_read_only(control, host);
  if (::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) < 0)
    sandbox_fail(control, "mounting a fresh /proc");
  // Host-global kernel state stays out of a root child's reach (docs/security-model.md): sysctls (a
  // core_pattern of "|program" would run as host root), SysRq, and sysfs.
  for (const char* path : {"/proc/sys", "/proc/sysrq-trigger", "/sys"})
    make_read_only(control, path);
  set_up_dev(control);
  mounted_layers layers = set_up_steps(control, options, opened, host);
  for (const auto& [fd, target] : etc_files)
    show_session_file(control, fd, target, options.private_view);
  pin(control, pinned_directories(options));
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
  return layers;
}

}  // namespace broker::sandbox
