// An optional value kept on the heap: a part that is seldom there costs a pointer, not its size,
// in every object that may hold it (an audit record's MCP and SSH parts, in every exchange a
// connection keeps for as long as its response streams). Reads as std::optional; copies deeply.
#pragma once

#include <memory>
#include <optional>
#include <utility>

namespace broker::base {

template <class T>
class boxed {
 public:
  boxed() = default;
  boxed(std::nullopt_t) {}                                       // NOLINT: as std::optional
  boxed(T value) : p_(std::make_unique<T>(std::move(value))) {}  // NOLINT: as std::optional
  boxed(std::optional<T> value)                                  // NOLINT: as std::optional
      : p_(value ? std::make_unique<T>(std::move(*value)) : nullptr) {}
  boxed(const boxed& other) : p_(other.p_ ? std::make_unique<T>(*other.p_) : nullptr) {}
  boxed(boxed&&) noexcept = default;
  boxed& operator=(const boxed& other) {
    if (this != &other) p_ = other.p_ ? std::make_unique<T>(*other.p_) : nullptr;
    return *this;
  }
  boxed& operator=(boxed&&) noexcept = default;
  ~boxed() = default;

  template <class... Args>
  T& emplace(Args&&... args) {
    p_ = std::make_unique<T>(std::forward<Args>(args)...);
    return *p_;
  }
  void reset() { p_.reset(); }

  bool has_value() const { return p_ != nullptr; }
  explicit operator bool() const { return has_value(); }
  T& operator*() { return *p_; }
  const T& operator*() const { return *p_; }
  T* operator->() { return p_.get(); }
  const T* operator->() const { return p_.get(); }

 private:
  std::unique_ptr<T> p_;
};

}  // namespace broker::base
