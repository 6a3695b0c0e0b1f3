// The blocks connections read into, taken when bytes move and given back when a connection goes
// idle, so an idle connection holds no buffer and a burst of connections leaves no heap behind.
// Blocks come from mmap(2): one given back beyond the small per-thread reserve goes back to the
// kernel at once, where a freed heap chunk would stay in the process (glibc keeps fragmented
// arena pages). The reserve keeps a busy connection from paying a syscall per read.
#pragma once

#include <cstddef>

namespace broker::proxy::buffer_pool {

// Every block is this size: limits::relay_buffer_bytes.
std::size_t block_bytes();
// A block of block_bytes(); throws std::bad_alloc when the kernel has no memory for it.
char* take();
// Returns a block from take() (on any thread); null is ignored.
void give_back(char* block) noexcept;
// Gives the calling thread's reserve back to the kernel (after a burst: a busy thread's reserve
// is up to 1 MiB).
void release_reserve() noexcept;
// Blocks held in reserve by the calling thread (for tests and benchmarks).
std::size_t reserved_here();
// Blocks taken and not given back, over all threads.
std::size_t outstanding();

}  // namespace broker::proxy::buffer_pool
