// Named limits and deadlines of the proxy. Each one has a defined outcome when exceeded.
#pragma once

#include <chrono>
#include <cstddef>

namespace broker::proxy::limits {

using namespace std::chrono_literals;

// Request head: beyond either limit the client gets 431 header_too_large.
inline constexpr std::size_t max_head_bytes = 64 * 1024;
inline constexpr std::size_t max_header_fields = 100;
// Response heads from upstreams are bounded too (a broken upstream gets 502).
inline constexpr std::size_t max_response_head_bytes = 64 * 1024;
inline constexpr std::size_t max_response_header_fields = 200;

// Read/relay buffer per direction. Large enough that bulk transfers are not syscall-bound.
inline constexpr std::size_t relay_buffer_bytes = 128 * 1024;

// Deadlines. A client that sends no complete head in time is dropped; a new keep-alive request
// may take longer to arrive than the first head does.
inline constexpr auto head_read_timeout = 30s;
inline constexpr auto keepalive_idle_timeout = 120s;
inline constexpr auto dns_timeout = 10s;
inline constexpr auto connect_timeout = 10s;
inline constexpr auto upstream_response_timeout = 120s;  // waiting for (more of) a response
inline constexpr auto body_idle_timeout = 60s;           // request body stalls
inline constexpr auto tunnel_idle_timeout = 600s;        // no byte either way
inline constexpr auto drain_timeout = 10s;               // SIGTERM: how long open connections get

// Connections served at once; beyond this new connections are answered 503 and closed.
inline constexpr std::size_t max_connections = 4096;

}  // namespace broker::proxy::limits
