// What joins an SSH connection's record to the key the session's agent signed with for it
// (docs/audit-log.md, "SSH"): the tunnel reads the server's signature of the key exchange, and
// ssh hands its agent the same signature in session-bind@openssh.com before it asks for a
// signature. Thread-safe: the tunnel and the agent filter run on different threads.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace broker::live {

class ssh_joins {
 public:
  // At most this many connections are open to joining at once; more are recorded without.
  static constexpr std::size_t max_open = 4096;

  struct joined {
    std::string host;  // the tunnel's
    std::uint16_t port = 0;
    std::string key;   // the fingerprint the agent signed with; empty until it has
    std::string user;  // the user it authenticated as
  };

  // The tunnel: a connection to host:port whose key exchange the server signed with `signature`.
  void opened(std::string_view signature, std::string host, std::uint16_t port);
  // The tunnel, when it ends: what the agent signed for it, and the entry forgotten.
  std::optional<joined> closed(std::string_view signature);
  // The agent filter, at a bind: the tunnel's host and port; nullopt when no tunnel of this session
  // carried that key exchange (a connection made through a jump host).
  std::optional<joined> find(std::string_view signature) const;
  // The agent filter, after a signature it made on a connection bound with `signature`.
  void signed_with(std::string_view signature, std::string key, std::string user);

 private:
  mutable std::mutex mutex_;
  std::map<std::string, joined, std::less<>> open_;  // by the signature's SHA-256
};

}  // namespace broker::live
