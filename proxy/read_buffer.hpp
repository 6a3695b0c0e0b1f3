// A fixed-capacity byte buffer for one direction of a connection: bytes are read into the free
// tail and consumed from the front, so a parser can take what it needs and leave the rest
// (pipelined requests, body bytes behind a head) for the next step.
#pragma once

#include <cstddef>
#include <cstring>
#include <memory>
#include <span>
#include <string_view>

namespace broker::proxy {

class read_buffer {
 public:
  explicit read_buffer(std::size_t capacity)
      : data_(std::make_unique<char[]>(capacity)), capacity_(capacity) {}

  std::string_view view() const { return {data_.get() + begin_, end_ - begin_}; }
  std::size_t size() const { return end_ - begin_; }
  bool empty() const { return begin_ == end_; }

  void consume(std::size_t n) {
    begin_ += n;
    if (begin_ == end_) begin_ = end_ = 0;
  }
  // Free space to read into; compacts first when the tail is full.
  char* tail() {
    if (end_ == capacity_ && begin_ > 0) {
      std::memmove(data_.get(), data_.get() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    return data_.get() + end_;
  }
  std::size_t tail_size() const { return capacity_ - end_; }
  // tail() and tail_size() in that order (as function arguments their order is unspecified,
  // and a size taken before the compaction could be zero).
  std::span<char> space() {
    char* t = tail();
    return {t, tail_size()};
  }
  void commit(std::size_t n) { end_ += n; }

 private:
  std::unique_ptr<char[]> data_;
  std::size_t capacity_;
  std::size_t begin_ = 0;
  std::size_t end_ = 0;
};

}  // namespace broker::proxy
