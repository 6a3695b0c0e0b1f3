#include "ssh/tunnel_join.hpp"

#include "live/ssh_joins.hpp"
#include "ssh/wire.hpp"

namespace broker::ssh {

tunnel_join::tunnel_join(live::ssh_joins& joins, std::string host, std::uint16_t port)
    : joins_(joins), host_(std::move(host)), port_(port) {}

tunnel_join::~tunnel_join() {
  if (opened_) joins_.closed(kex_.signature());
}

bool tunnel_join::server_bytes(std::string_view bytes) {
  const bool more = kex_.feed(bytes);
  if (!opened_ && !kex_.signature().empty()) {
    joins_.opened(kex_.signature(), host_, port_);
    opened_ = true;
  }
  return more;
}

session::audit_entry::ssh_connection tunnel_join::finish() {
  session::audit_entry::ssh_connection out;
  if (!kex_.host_key().empty()) out.host_key = fingerprint(kex_.host_key());
  if (opened_) {
    if (auto joined = joins_.closed(kex_.signature())) {
      out.key = std::move(joined->key);
      out.user = std::move(joined->user);
    }
    opened_ = false;
  }
  return out;
}

}  // namespace broker::ssh
