// nghttp2's memory for one HTTP/2 session, counted (docs/architecture.md: memory per connection
// bounded and stated): every block carries its size in front of it, so the session can say what it
// holds.
#pragma once

#include <nghttp2/nghttp2.h>

#include <cstddef>

namespace broker::http {

class h2_memory {
 public:
  h2_memory();
  h2_memory(const h2_memory&) = delete;
  h2_memory& operator=(const h2_memory&) = delete;

  // For nghttp2_session_*_new3; this object must outlive the session.
  nghttp2_mem* mem() { return &mem_; }
  // Bytes nghttp2 holds now.
  std::size_t bytes() const { return bytes_; }

 private:
  static constexpr std::size_t header = alignof(std::max_align_t);
  static std::size_t size_of(void* p);
  void* take(std::size_t size);
  void give(void* p);

  nghttp2_mem mem_{};
  std::size_t bytes_ = 0;
};

}  // namespace broker::http
