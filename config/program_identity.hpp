// Whether a connection comes from the programs a rule or a credential names (docs/policy.md,
// "programs"). Attribution finds every process
// holding the connection's socket; each must run a listed program, and running one means running
// the very file at its path (same device and inode) that the session cannot change: a copy
// elsewhere, a file of the session's own under the same name, or a listed program's name on a
// file the session could rewrite proves nothing.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace broker::config {

// A file by what stat(2) says of it.
struct file_id {
  std::uint64_t dev = 0;
  std::uint64_t ino = 0;
  bool operator==(const file_id&) const = default;
};

// One process holding a connection's socket.
struct program_holder {
  int pid = 0;      // in the broker's pid namespace
  std::string exe;  // /proc/PID/exe read as a link, as the broker reads it; "" when unreadable
  // stat of /proc/PID/exe: the file the process runs, whatever mount namespace it was run from;
  // nullopt when unreadable.
  std::optional<file_id> file;
};

// What of the broker's view of the file system the session can change: a file there, or a link
// on the way to it, could be another program by the time it runs.
class session_writes {
 public:
  virtual ~session_writes() = default;
  // Whether the session can change the file or link at `path` (absolute, its directories real
  // ones, as the broker sees them) or put another in its place.
  virtual bool can_change(const std::string& path) const = 0;

  // wrap's netns sandbox: the host is read-only inside but for the places its writes go through
  // to (`through`: the workspaces, the agents' data, files.writable; absolute and canonical).
  // What it writes elsewhere is its own (copy-on-write layers, private directories), never a
  // file of the broker's view.
  static std::shared_ptr<const session_writes> through(std::vector<std::string> places);
  // No sandbox (wrap's env mode): whatever this process's user can write, the file itself or a
  // directory above it (which lets it put another file there). For root, all but read-only
  // mounts.
  static std::shared_ptr<const session_writes> user();
};

// Who opened a connection, as far as "programs" are concerned.
struct client_identity {
  std::vector<program_holder> holders;  // highest pid first; empty when unknown
  // Every process that could hold the socket was searched. An incomplete search may have
  // missed a holder, so it matches no "programs".
  bool complete = false;
  // What the session can change; null: everything (nothing matches).
  std::shared_ptr<const session_writes> writes;
};

// The regular file `path` names as the broker sees it, resolved link by link; nullopt when it
// does not resolve to one, or when the session can change it or a link on the way.
std::optional<file_id> protected_file(const std::string& path, const session_writes& writes);

// Whether `entry` (a "programs" entry) is a glob: it has '*', '?' or '['.
bool is_program_glob(std::string_view entry);

// Whether every holder of `client`'s socket runs a program `entries` names: an absolute path
// names the file there (protected_file, compared by device and inode); a glob names a holder whose
// executable's path matches it (fnmatch, '*' matching '/' too) when that path is, in the same
// way, the file it runs. No client, no holder, an incomplete search or an unreadable holder:
// false.
bool program_matches(const std::vector<std::string>& entries, const client_identity* client);

}  // namespace broker::config
