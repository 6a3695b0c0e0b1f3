// Opening a listening TCP socket the way every broker listener does (proxy, admin): address
// reuse, the system's longest backlog. Include only where Asio is already needed.
#pragma once

#include "base/asio.hpp"

namespace broker::base {

inline error_code listen_on(tcp::acceptor& acceptor, const tcp::endpoint& endpoint) {
  error_code ec;
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  return ec;
}

}  // namespace broker::base
