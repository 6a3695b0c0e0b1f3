// `broker serve` assembled and run (docs/cli.md, docs/gateway.md): one session on a listening
// address, or with `gateway` a team gateway's many sessions; the CA, audit log, metrics and admin
// listener, Redis, the env file, the control socket and policy reload, until SIGINT/SIGTERM.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "live/common_options.hpp"

namespace broker::gateway {

struct serve_config {
  live::common_options common;
  std::string host;  // the listening address (an IP) and port (0: any free port)
  std::uint16_t port = 0;
  std::string session;
  std::string env_file;
  std::string ca_dir;
  std::vector<std::string> timeouts;
  // Team gateway (docs/gateway.md): many sessions, each client authenticating as one.
  bool gateway = false;
  std::string proxy_authority;  // what session env files name (a front such as haproxy)
  std::string redis;            // replicas share sessions, budgets and revocations here
  std::string replica;          // this replica's name (default: the gateway's session name)
  std::string admin_host;       // the admin listener (/metrics); empty: none
  std::uint16_t admin_port = 0;
  // --audit-sink (repeatable; audit_sink.hpp): "redis" or "redis:STREAM-KEY", "syslog" or
  // "syslog:HOST:PORT": every record also goes there.
  std::vector<std::string> audit_sinks;
};

// Serves until SIGINT/SIGTERM. Throws proxy::start_error when the session cannot start.
void serve(const serve_config& config);

}  // namespace broker::gateway
