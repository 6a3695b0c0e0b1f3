// The session's ssh-agent (docs/security-model.md, "SSH"): OpenSSH's own, outside the sandbox,
// in a private directory of its own, loaded with the user's keys, each bound (ssh-add -h) to the
// hosts the policy's ssh rules allow whose host keys are known. It ends with the session, and
// with the broker: a keeper process, which the kernel tells when the broker dies, ends it and
// removes its socket (the agent is set-group-ID, so the kernel would not tell it itself).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "config/policy_set.hpp"

namespace broker::ssh {

struct agent_plan {
  std::string home;
  // Private key files, absolute or "~/..."; empty: every key in ~/.ssh whose public half is there.
  std::vector<std::string> keys;
  // known_hosts lines trusted besides the user's and the system's (the policy's "host_keys").
  std::vector<std::string> host_keys;
  std::vector<config::destination> hosts;  // policy_set::ssh_destinations
  bool interactive = false;                // ssh-add may ask the person for a passphrase
};

class agent_process {
 public:
  // Starts and loads the agent. Throws std::runtime_error naming what failed (no ssh-agent, its
  // socket never came).
  explicit agent_process(const agent_plan& plan);
  ~agent_process();
  agent_process(const agent_process&) = delete;
  agent_process& operator=(const agent_process&) = delete;

  const std::string& socket() const { return socket_; }
  // The keys it holds (SHA256 fingerprints), the hosts they are bound to ("github.com" or
  // "[git.corp]:2222"), the hosts left out for want of a known host key, and the key files that
  // did not load (encrypted, with no passphrase given).
  const std::vector<std::string>& keys() const { return keys_; }
  const std::vector<std::string>& hosts() const { return hosts_; }
  const std::vector<std::string>& hosts_without_key() const { return unknown_hosts_; }
  const std::vector<std::string>& keys_not_loaded() const { return not_loaded_; }

 private:
  void start_keeper(const std::string& agent);
  // Ends the agent (through its keeper) and removes its directory.
  void stop();
  void write_known_hosts(const agent_plan& plan);
  void load_keys(const agent_plan& plan);
  void list_keys();

  std::string dir_;
  std::string socket_;
  pid_t keeper_ = -1;
  std::vector<std::string> keys_;
  std::vector<std::string> hosts_;
  std::vector<std::string> unknown_hosts_;
  std::vector<std::string> not_loaded_;
};

// Every key in ~/.ssh whose public half is beside it ("id_ed25519" with "id_ed25519.pub").
std::vector<std::string> user_keys(const std::string& home);

// The host-key lookup name of a destination in known_hosts: "github.com", or "[host]:2222".
std::string known_hosts_name(const config::destination& d);

}  // namespace broker::ssh
