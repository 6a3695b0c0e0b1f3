// Where the gateway's Redis is and how to log in to it, parsed from the URL an operator gives
// (`broker serve --redis URL`):
//   redis://[[user]:password@]host[:port][/db]        (an IPv6 host in brackets: [::1])
//   unix:///path/to/redis.sock[?db=N]                 (also redis+unix://, and unix://:pw@/path)
// The user, password and socket path may be percent-encoded. The password is a secret: it is
// never printed, and no parse error quotes the URL.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/secret.hpp"

namespace broker::gateway {

struct redis_endpoint {
  enum class transport { tcp, unix_socket };

  transport kind = transport::tcp;
  std::string host;  // tcp: a name or an address (an IPv6 address without its brackets)
  std::uint16_t port = 6379;
  std::string path;  // unix_socket: the socket's absolute path
  std::string user;  // empty: AUTH with the password alone (Redis's default user)
  // Null: no AUTH. Shared, so that an endpoint copies (one client per worker thread) while its
  // password exists once.
  std::shared_ptr<const base::secret> password;
  unsigned db = 0;  // SELECTed on connect when not 0

  // Throws std::invalid_argument saying what is wrong with the URL.
  static redis_endpoint parse(std::string_view url);

  // The URL without the password (for logs and error messages).
  std::string display() const;
};

}  // namespace broker::gateway
