#include "proxy/buffer_pool.hpp"

#include <sys/mman.h>

#include <atomic>
#include <new>
#include <vector>

#include "proxy/limits.hpp"

namespace broker::proxy::buffer_pool {
namespace {

// Per thread: a connection's reads and its next request's reads run on one thread, so a block
// given back is usually taken again by the same thread a moment later.
constexpr std::size_t reserve_per_thread = 16;

std::atomic<std::size_t> taken{0};

void unmap(char* block) noexcept {
  ::munmap(block, limits::relay_buffer_bytes);
}

struct reserve {
  std::vector<char*> blocks;
  reserve() { blocks.reserve(reserve_per_thread); }
  ~reserve() {
    for (char* b : blocks) unmap(b);
  }
};

reserve& here() {
  thread_local reserve r;
  return r;
}

}  // namespace

std::size_t block_bytes() {
  return limits::relay_buffer_bytes;
}

char* take() {
  auto& r = here();
  char* block = nullptr;
  if (!r.blocks.empty()) {
    block = r.blocks.back();
    r.blocks.pop_back();
  } else {
    void* p = ::mmap(nullptr, limits::relay_buffer_bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    block = static_cast<char*>(p);
  }
  taken.fetch_add(1, std::memory_order_relaxed);
  return block;
}

void give_back(char* block) noexcept {
  if (!block) return;
  taken.fetch_sub(1, std::memory_order_relaxed);
  auto& r = here();
  if (r.blocks.size() < reserve_per_thread) {
    r.blocks.push_back(block);  // capacity reserved up front: never allocates
    return;
  }
  unmap(block);
}

void release_reserve() noexcept {
  auto& r = here();
  for (char* b : r.blocks) unmap(b);
  r.blocks.clear();
}

std::size_t reserved_here() {
  return here().blocks.size();
}

std::size_t outstanding() {
  return taken.load(std::memory_order_relaxed);
}

}  // namespace broker::proxy::buffer_pool
