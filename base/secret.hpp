// A secret value (a real credential). It cannot be printed, formatted, logged or converted: the
// only way to its bytes is expose(), which callers use to compare or send them, never to show
// them. Its memory is zeroed when it is destroyed or moved from.
#pragma once

#include <cstddef>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace broker::base {

class secret {
 public:
  secret() = default;
  // Takes the value and wipes the source string's buffer.
  explicit secret(std::string&& value);
  ~secret();
  secret(secret&& other) noexcept;
  secret& operator=(secret&& other) noexcept;
  secret(const secret&) = delete;
  secret& operator=(const secret&) = delete;

  // The bytes. Compare or transmit them; never format, log or store them elsewhere.
  std::string_view expose() const { return {data_.get(), size_}; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  friend std::ostream& operator<<(std::ostream&, const secret&) = delete;

 private:
  void wipe() noexcept;
  std::unique_ptr<char[]> data_;
  std::size_t size_ = 0;
};

// Zeroes a string's buffer (and clears it), for copies of secret bytes that had to exist briefly.
void wipe(std::string& s) noexcept;

// Runs `wipe_them` when the scope ends, however it ends (an exception, or a cancelled
// coroutine's frame being destroyed): for buffers that may hold real values for a while.
template <class F>
class wipe_on_exit {
 public:
  explicit wipe_on_exit(F wipe_them) : wipe_them_(std::move(wipe_them)) {}
  ~wipe_on_exit() { wipe_them_(); }
  wipe_on_exit(const wipe_on_exit&) = delete;
  wipe_on_exit& operator=(const wipe_on_exit&) = delete;

 private:
  F wipe_them_;
};

}  // namespace broker::base
