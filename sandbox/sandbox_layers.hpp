// The writable part of a netns child's file system (docs/security-model.md), made by its init:
// first the whole host file system read-only in the child's mount namespace (what no step names as
// writable is refused), then the session's copy-on-write layers (overlayfs over a host
// directory, its upper directory on a tmpfs of the session's own, bounded in size), and the
// places the session's writes go through to, bound in writable again.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace broker::sandbox {

// A mount of the host's as /proc/self/mountinfo lists it: where, and whether read-only.
struct host_mount {
  std::string path;
  bool read_only = false;
};

// mountinfo's lines, in order (parents first); mount points unescaped (\040 is a space).
std::vector<host_mount> parse_mountinfo(std::string_view text);

// This mount namespace's mounts now; fails through sandbox_fail.
std::vector<host_mount> read_host_mounts(int control);

// Every mount in `mounts` read-only but those under /proc and /dev (replaced by the child's
// own), keeping the flags a user namespace locks; a mount the child cannot reach is left.
void make_host_read_only(int control, const std::vector<host_mount>& mounts);

// The mount at `path` (a place bound through) and those under it writable again where the host
// had them writable (`host`: the mounts before make_host_read_only).
void make_writable_again(int control, const std::string& path, const std::vector<host_mount>& host);

// A file a layer holds from its start (launch_options::seed): its source opened before
// anything covered it (-1 for a name that stays missing), and its target.
struct open_seed {
  int source = -1;
  std::string target;
};

// The layers of one session, their upper directories on one tmpfs (made with fsopen(2), never
// attached anywhere the child could name it): layer N's upper is "N/u", its work directory
// "N/w".
class layer_maker {
 public:
  // `bytes`: what the tmpfs may hold. Fails through sandbox_fail when no tmpfs can be made.
  layer_maker(int control, std::uint64_t bytes);
  ~layer_maker();
  layer_maker(const layer_maker&) = delete;
  layer_maker& operator=(const layer_maker&) = delete;

  // Layer `index` over `target`, the host's directory opened as `lower`, with `seeds` (those in
  // it) placed in its upper directory first. False when the kernel would not stack it (the
  // directory stays as the host's, read-only).
  bool mount(std::size_t index, int lower, const std::string& target,
             const std::vector<open_seed>& seeds);

  // The tmpfs's root (ownership passes to the caller).
  int take_upper();

 private:
  int control_;
  int upper_ = -1;
};

}  // namespace broker::sandbox
