// Named limits of an HTTP message head. Each one has a defined outcome when exceeded.
#pragma once

#include <cstddef>

namespace broker::http::limits {

// Request head: beyond either limit the client gets 431 header_too_large.
inline constexpr std::size_t max_head_bytes = 64 * 1024;
inline constexpr std::size_t max_header_fields = 100;
// Response heads from upstreams are bounded too (a broken upstream gets 502).
inline constexpr std::size_t max_response_head_bytes = 64 * 1024;
inline constexpr std::size_t max_response_header_fields = 200;

}  // namespace broker::http::limits
