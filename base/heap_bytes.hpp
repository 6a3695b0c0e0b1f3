// What a string holds on the heap beyond its own object: 0 while it fits its short-string room.
#pragma once

#include <cstddef>
#include <string>

namespace broker::base {

inline std::size_t heap_bytes(const std::string& s) {
  return s.capacity() > std::string().capacity() ? s.capacity() + 1 : 0;
}

}  // namespace broker::base
