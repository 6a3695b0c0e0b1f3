// Starting and ending the wrapped command (docs/cli.md, docs/security-model.md).
//
// netns: the child is cloned into fresh network, PID, mount, IPC and UTS namespaces (and a user
// namespace when the broker is not root) first, before the session is prepared. Its first process
// is a small init that brings up loopback and capture, creates the proxy's listening socket there
// and hands it to the broker; then, from the broker's plan, makes the host's file system
// read-only, mounts a fresh /proc, gives the child private /tmp, /run and the like, its
// copy-on-write layers over the home (and the system's directories for a root command) with the
// workspace and the other writable places bound through, masks credential files, and runs the
// command as its own process group and forwards signals to it.
// When the command exits, init ends what it left behind, and the kernel ends the rest of the
// namespace with init.
// env: the command is a plain child in its own process group; only variables keep it inside.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "sandbox/private_dirs.hpp"

namespace broker::sandbox {

// The broker could not start the child (exit 125).
class launch_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The kernel would not make the namespaces (user namespaces disabled, a container's seccomp
// profile): `--isolate auto` runs in env mode instead.
class namespaces_unavailable : public launch_error {
 public:
  using launch_error::launch_error;
};

enum class isolation { netns, env };

struct launch_options {
  std::vector<std::string> argv;  // the command; argv[0] is looked up in PATH
  std::vector<std::string> envp;  // "NAME=VALUE", the whole child environment
  isolation mode = isolation::netns;
  std::uint16_t proxy_port = 0;  // netns: the listener's port inside the namespace
  // netns: the child's view of the file system, step by step, parents first (private_dirs.hpp):
  // host IPC directories emptied, paths kept through them, the session's copy-on-write layers
  // and the places its writes go through to.
  std::vector<view_step> private_view;
  // netns: what a layer holds from the start, in its upper directory (absolute targets): a
  // file copied from `source` (a login file's dummy copy, docs/agents.md; an agent's stored key),
  // or with no source a name that stays missing whatever the host makes there meanwhile (a
  // credential file that does not exist yet). `bind_otherwise`: where the target is in no layer,
  // or its layer could not be made, the copy is bound over the target instead; what the child
  // writes there stays in the copy either way.
  struct seed {
    std::string source, target;
    bool bind_otherwise = false;
  };
  std::vector<seed> seeds;
  std::uint64_t layer_bytes = 0;       // netns: what the layers may hold in all (a tmpfs's size)
  std::vector<std::string> masks;      // netns: absolute paths hidden from the child
  std::vector<std::string> read_only;  // netns: absolute paths the child cannot change
  std::vector<std::string> scratch;    // netns: directories shown empty and private (a tmpfs)
  // netns: transparent capture (docs/architecture.md): every TCP connection the command dials to a
  // non-loopback address lands on a listener at `capture_port`, and its DNS is the broker's, on
  // port 53 inside the namespace.
  bool capture = false;
  std::uint16_t capture_port = 0;
  // netns: session files shown over files under /etc (with capture: /etc/resolv.conf naming
  // the broker's DNS, /etc/hosts with loopback names only). {copy, target}, absolute paths.
  std::vector<std::pair<std::string, std::string>> etc_files;
  std::chrono::milliseconds grace{2000};  // between TERM and KILL for what the command left
};

class child_session {
 public:
  // netns: makes the namespaces and their init now, which sets up, from `network`'s mode,
  // ports and capture, loopback, capture's rules and the sockets the broker serves, while the
  // broker prepares the rest of the session; the kernel finishes its work on the namespace
  // (capture's rules above all) meanwhile too. Throws namespaces_unavailable when the kernel
  // would not make them (the message says why, e.g. user namespaces disabled). env: nothing
  // until launch(). Signals the caller will forward should be blocked in the calling thread
  // before (they are unblocked in the command), and the process single-threaded (init is a
  // clone of it).
  explicit child_session(const launch_options& network);
  // Starts the command with `options`. netns: takes init's sockets (take_listener,
  // take_sock_diag, take_capture from then on), and init sets up the file system first. Throws
  // launch_error naming what failed.
  void launch(const launch_options& options);
  ~child_session();
  child_session(const child_session&) = delete;
  child_session& operator=(const child_session&) = delete;

  // netns: the listening socket made inside the child's namespace (ownership passes to the
  // caller, once); -1 in env mode.
  int take_listener();
  // netns: a NETLINK_SOCK_DIAG socket made inside the child's network namespace, for finding
  // which of its sockets a connection comes from (ownership passes to the caller, once); -1 in
  // env mode or when the kernel refused one.
  int take_sock_diag();
  // netns with capture: the sockets made for it inside the namespace (ownership passes to the
  // caller, once); all -1, with `unavailable` saying why, when the kernel refused the set-up.
  struct capture_sockets {
    int listener = -1;
    int dns_udp = -1;
    int dns_tcp = -1;
    std::string unavailable;
  };
  capture_sockets take_capture();
  // The process the broker waits for: init (netns) or the command (env).
  pid_t pid() const { return pid_; }
  // Passes a signal on to the command (through init in netns mode).
  void forward(int signo) const;
  // Reaps the child if it has ended; returns its exit status per docs/cli.md (the code, or
  // 128+N when a signal N ended the command), or -1 while it runs.
  int poll();
  // netns: the session's layers as init made them: for each layer step of the plan, in order,
  // whether it was mounted (a kernel that will not stack it leaves the directory read-only).
  const std::vector<bool>& layers_mounted() const { return layers_mounted_; }
  // netns: the file system holding every layer's upper directory ("N/u" for the N-th layer),
  // kept by this descriptor after the namespace ends (ownership passes to the caller, once); -1
  // when no layer was made.
  int take_layer_upper();
  // netns: init's word, once the command and everything it left have ended and been reaped,
  // comes before init's own end (the kernel then takes down its mounts, 2-3 ms): SIGIO tells
  // of it. Returns the exit status as poll() does once it has come, else -1. Init is reaped
  // when this object ends.
  int take_end_report();
  // env mode: TERM to what is left of the command's process group, then KILL after the grace.
  // netns: the namespace ends with init; nothing is left.
  void end_leftovers();
  // KILL to the command's whole tree at once (a budget ended the session): init in netns mode
  // (its namespace goes with it), the process group in env mode.
  void kill_all();

 private:
  // netns: the sockets init made, received.
  void take_sockets();
  // netns, made but not launched: init is told to end, and reaped.
  void end_unlaunched();

  launch_options options_;
  sigset_t command_mask_{};
  int control_ = -1;     // netns: to init, until launch()
  int end_report_ = -1;  // netns: from init, after launch(), until its word that all ended
  pid_t pid_ = -1;
  bool reaped_ = false;
  pid_t closer_ = -1;  // the process closing the nfnetlink socket (take_sockets)
  int listener_ = -1;
  int sock_diag_ = -1;
  int layer_upper_ = -1;
  std::vector<bool> layers_mounted_;
  capture_sockets capture_;
  int status_ = -1;
};

// A wait status as a shell reports it: the exit code, 128+N for signal N, else 125.
int exit_code(int status);

}  // namespace broker::sandbox
