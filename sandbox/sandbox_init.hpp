// The first process of a netns-mode child (PID 1 of its namespace): set up the network (loopback,
// capture) and hand the sockets to the broker, take the rest of the launch from the broker's plan
// (launch_plan.hpp) once the session is prepared, set up the file system, run the command, and
// end everything when it ends. Runs in a cloned child of the still single-threaded broker; it
// never returns.
#pragma once

#include <signal.h>

#include "sandbox/child_session.hpp"

namespace broker::sandbox {

// The proxy listener, a NETLINK_SOCK_DIAG socket, and with capture its listener, the DNS UDP
// and TCP sockets and the nfnetlink socket its rules went over.
inline constexpr std::size_t max_sandbox_sockets = 6;

struct sandbox_args {
  const launch_options* options;  // the mode, ports and capture; the rest comes as a plan
  int control;                    // the child's end of a SOCK_SEQPACKET pair with the broker
  int broker_end;                 // the broker's end, closed here
  bool user_namespace;            // wait for the broker to write the id maps first
  sigset_t forwarded;             // the signals init passes on to the command (blocked on entry)
  sigset_t original_mask;
};

// clone(2) entry point; `arg` is a sandbox_args*.
int sandbox_init(void* arg);

// The signals `wrap` forwards to the command (docs/cli.md).
sigset_t forwarded_signals();

// In a freshly forked child: default dispositions, `mask` restored, its own process group in the
// terminal's foreground when there is one, then exec; never returns (126/127 as a shell does).
[[noreturn]] void exec_command(const launch_options& options, const sigset_t& mask);

}  // namespace broker::sandbox
