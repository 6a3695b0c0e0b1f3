// wrap: where a session's clients live, which the request path uses to attribute a connection
// to the processes holding it (docs/policy.md "programs") and a synthetic address to its name
// (docs/architecture.md). A session that wrap did not start has none of it.
#pragma once

#include <memory>

#include "config/program_identity.hpp"

namespace broker::capture {
class sock_diag;
class synthetic_addresses;
}  // namespace broker::capture

namespace broker::live {

struct session_clients {
  // A pid inside their network namespace (0: this one), the root of their process tree, and a
  // NETLINK_SOCK_DIAG socket of their namespace (shared by the proxy's threads; it locks per
  // lookup) to find a connection's socket inode.
  int netns_pid = 0;
  int root_pid = 0;
  std::shared_ptr<capture::sock_diag> sock_diag;
  // What of the broker's file system the session can change, which proves nothing about the
  // programs a connection's processes run (docs/policy.md). Null: everything.
  std::shared_ptr<const config::session_writes> writes;
  // With transparent capture: the names the child resolved through the broker's DNS and their
  // synthetic addresses (docs/architecture.md); null otherwise.
  std::shared_ptr<capture::synthetic_addresses> synthetic_names;
};

}  // namespace broker::live
