// The session's SSH agent socket (docs/security-model.md, "SSH"): what a client inside the
// session reaches as SSH_AUTH_SOCK. Each client gets its own connection to the broker's
// ssh-agent, and each message passes only if it is on the allowlist (agent_messages.hpp); every
// other one is answered with a failure and recorded, as is every signature the agent refuses and
// every list it hides keys from. A signature it makes is joined to its connection's record
// (live/ssh_joins.hpp).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace broker::live {
class live_session;
}  // namespace broker::live

namespace broker::ssh {

// The session's socket at `path` (mode 0600, listening); throws std::runtime_error naming it.
int agent_listener(const std::string& path);

class agent_filter {
 public:
  // At most this many clients at once; more are closed as they come.
  static constexpr std::size_t max_clients = 64;

  // Serves `listener` (a listening unix socket; owned from here) on a thread of its own until
  // destroyed. `agent_socket`: the agent's own socket; `keys`: how many keys it holds.
  agent_filter(int listener, std::string agent_socket, std::uint32_t keys,
               std::shared_ptr<live::live_session> ctx);
  ~agent_filter();
  agent_filter(const agent_filter&) = delete;
  agent_filter& operator=(const agent_filter&) = delete;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace broker::ssh
