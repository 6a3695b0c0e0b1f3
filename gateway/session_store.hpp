// Where a team gateway's sessions live (docs/gateway.md): in this process (the embedded default),
// or in Redis, shared by every replica (redis_store.hpp).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/asio.hpp"
#include "gateway/session_record.hpp"

namespace broker::gateway {

namespace asio = boost::asio;

class session_store {
 public:
  virtual ~session_store() = default;

  // The admin side, from the control socket's thread; may block for a round trip. Throw
  // std::runtime_error (with a sentence for the user) when the store cannot be reached.
  virtual void put(const session_record& r) = 0;
  virtual std::vector<session_record> all() = 0;  // oldest first
  virtual std::optional<session_record> get(const std::string& id) = 0;
  // false: no such session.
  virtual bool revoke(const std::string& id) = 0;

  // The proxy side, on a proxy thread: a session this replica has not served yet (created by
  // `session create` on another replica). nullopt when there is no such session; throws
  // std::runtime_error when the store cannot be reached.
  virtual asio::awaitable<std::optional<session_record>> fetch(std::string id) = 0;
};

// The embedded default: sessions live and die with this process.
std::unique_ptr<session_store> make_memory_store();

}  // namespace broker::gateway
