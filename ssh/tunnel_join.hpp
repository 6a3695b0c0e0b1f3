// The tunnel's side of an SSH connection's record (docs/audit-log.md, "SSH"): it reads the
// server's key exchange as it passes (kex_watch.hpp), offers the connection for joining as soon
// as the server has signed the exchange (before the client can bind its agent to it), and at the
// end fills the record with the host key and the key the session's agent signed with.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "session/audit_record.hpp"
#include "ssh/kex_watch.hpp"

namespace broker::live {
class ssh_joins;
}  // namespace broker::live

namespace broker::ssh {

class tunnel_join {
 public:
  tunnel_join(live::ssh_joins& joins, std::string host, std::uint16_t port);
  ~tunnel_join();
  tunnel_join(const tunnel_join&) = delete;
  tunnel_join& operator=(const tunnel_join&) = delete;

  // The next bytes the server sent; false once nothing more is read.
  bool server_bytes(std::string_view bytes);
  // What the record says of the connection; the join is closed.
  session::audit_entry::ssh_connection finish();

 private:
  live::ssh_joins& joins_;
  std::string host_;
  std::uint16_t port_;
  kex_watch kex_;
  bool opened_ = false;
};

}  // namespace broker::ssh
