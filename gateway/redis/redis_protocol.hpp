// RESP, both ways, by hiredis 0.14 (its formatter and its reply reader; none of its networking):
// append_command() writes a command as Redis expects it, reply_reader turns the bytes that come
// back into redis_reply values. One reader per connection: after a protocol error it is spent,
// and so is the connection.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "gateway/redis/redis_reply.hpp"

struct redisReader;

namespace broker::gateway {

// Appends `args` (a command and its arguments, binary-safe) to `out` as one RESP command. The
// formatter's own copy is zeroed before it is freed (AUTH carries a password).
void append_command(std::string& out, const std::vector<std::string>& args);

class reply_reader {
 public:
  reply_reader();
  ~reply_reader();
  reply_reader(const reply_reader&) = delete;
  reply_reader& operator=(const reply_reader&) = delete;

  // Takes bytes from the server. False when the reader has failed (see error()).
  bool feed(const char* data, std::size_t size);
  // The next complete reply, or nothing when more bytes are needed or the reader has failed.
  std::optional<redis_reply> next();

  bool failed() const;
  // Why the bytes were not RESP (hiredis's words: "Protocol error, got ..."), once failed().
  std::string error() const;
  // Bytes fed and not yet returned as replies (a reply still arriving, or bytes nobody asked for).
  std::size_t buffered() const;

 private:
  redisReader* reader_;
};

}  // namespace broker::gateway
