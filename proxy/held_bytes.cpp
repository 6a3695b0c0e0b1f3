#include "proxy/held_bytes.hpp"

#include <atomic>

#include "proxy/limits.hpp"

namespace broker::proxy {
namespace {

std::atomic<std::size_t> held_total{0};

}  // namespace

held_bytes& held_bytes::operator=(held_bytes&& other) noexcept {
  if (this != &other) {
    release();
    held_ = other.held_;
    other.held_ = 0;
  }
  return *this;
}

bool held_bytes::hold(std::size_t total) {
  if (total <= held_) {
    held_total.fetch_sub(held_ - total);
    held_ = total;
    return true;
  }
  const std::size_t more = total - held_;
  std::size_t now = held_total.load();
  do {
    if (now + more > limits::max_held_body_bytes) return false;
  } while (!held_total.compare_exchange_weak(now, now + more));
  held_ = total;
  return true;
}

void held_bytes::release() noexcept {
  held_total.fetch_sub(held_);
  held_ = 0;
}

std::size_t held_bytes::held_in_process() {
  return held_total.load();
}

}  // namespace broker::proxy
