// A byte buffer for one direction of a connection: bytes are read into the free tail and consumed
// from the front, so a parser can take what it needs and leave the rest (pipelined requests, body
// bytes behind a head) for the next step. Its block (buffer_pool) is taken on the first read and
// given back by release() once everything read has been consumed: an idle connection holds none.
#pragma once

#include <cstddef>
#include <cstring>
#include <span>
#include <string_view>

#include "proxy/buffer_pool.hpp"

namespace broker::proxy {

class read_buffer {
 public:
  read_buffer() = default;
  ~read_buffer() { buffer_pool::give_back(data_); }
  read_buffer(const read_buffer&) = delete;
  read_buffer& operator=(const read_buffer&) = delete;

  std::string_view view() const { return {data_ + begin_, end_ - begin_}; }
  std::size_t size() const { return end_ - begin_; }
  bool empty() const { return begin_ == end_; }
  static std::size_t capacity() { return buffer_pool::block_bytes(); }

  void consume(std::size_t n) {
    begin_ += n;
    if (begin_ == end_) begin_ = end_ = 0;
  }
  // Gives the block back when it holds no unconsumed byte (before an idle wait).
  void release() {
    if (!empty() || !data_) return;
    buffer_pool::give_back(data_);
    data_ = nullptr;
  }
  bool holds_block() const { return data_ != nullptr; }

  // Free space to read into, taking a block first if none is held; compacts when the tail is full.
  std::span<char> space() {
    if (!data_) data_ = buffer_pool::take();
    if (end_ == capacity() && begin_ > 0) {
      std::memmove(data_, data_ + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    return {data_ + end_, capacity() - end_};
  }
  void commit(std::size_t n) { end_ += n; }

 private:
  char* data_ = nullptr;
  std::size_t begin_ = 0;
  std::size_t end_ = 0;
};

}  // namespace broker::proxy
