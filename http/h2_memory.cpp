#include "http/h2_memory.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace broker::http {

h2_memory::h2_memory() {
  mem_.mem_user_data = this;
  mem_.malloc = [](size_t size, void* self) { return static_cast<h2_memory*>(self)->take(size); };
  mem_.free = [](void* p, void* self) { static_cast<h2_memory*>(self)->give(p); };
  mem_.calloc = [](size_t n, size_t size, void* self) -> void* {
    if (size != 0 && n > SIZE_MAX / size) return nullptr;
    void* p = static_cast<h2_memory*>(self)->take(n * size);
    if (p) std::memset(p, 0, n * size);
    return p;
  };
  mem_.realloc = [](void* p, size_t size, void* self) -> void* {
    auto* m = static_cast<h2_memory*>(self);
    if (!p) return m->take(size);
    const std::size_t old = size_of(p);
    void* fresh = m->take(size);
    if (!fresh) return nullptr;
    std::memcpy(fresh, p, std::min(old, size));
    m->give(p);
    return fresh;
  };
}

std::size_t h2_memory::size_of(void* p) {
  std::size_t size;
  std::memcpy(&size, static_cast<char*>(p) - header, sizeof size);
  return size;
}

void* h2_memory::take(std::size_t size) {
  char* block = static_cast<char*>(std::malloc(header + size));
  if (!block) return nullptr;
  std::memcpy(block, &size, sizeof size);
  bytes_ += size;
  return block + header;
}

void h2_memory::give(void* p) {
  if (!p) return;
  bytes_ -= size_of(p);
  std::free(static_cast<char*>(p) - header);
}

}  // namespace broker::http
