// Bytes the proxy holds whole for a while (request bodies its credential plan reads whole before
// they may go on: a payload to hash, a token request to answer), counted against one allowance
// for the process (limits::max_held_body_bytes) so that many large bodies at once cannot exhaust
// the broker's memory; a request that would pass it gets 503.
#pragma once

#include <cstddef>

namespace broker::proxy {

class held_bytes {
 public:
  held_bytes() = default;
  ~held_bytes() { release(); }
  held_bytes(const held_bytes&) = delete;
  held_bytes& operator=(const held_bytes&) = delete;
  held_bytes(held_bytes&& other) noexcept : held_(other.held_) { other.held_ = 0; }
  held_bytes& operator=(held_bytes&& other) noexcept;

  // Holds `total` bytes in all (more or less than now); false, holding what it held, when the
  // process-wide allowance has not that much left.
  bool hold(std::size_t total);
  void release() noexcept;
  std::size_t held() const { return held_; }

  // Everything held by every holder in the process, for tests and status.
  static std::size_t held_in_process();

 private:
  std::size_t held_ = 0;
};

}  // namespace broker::proxy
