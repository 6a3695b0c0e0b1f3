// Named limits and deadlines of the proxy. Each one has a defined outcome when exceeded.
#pragma once

#include <cstddef>

namespace broker::proxy::limits {

// A read buffer's block (buffer_pool): a client connection's (heads, forwarded bodies, the
// tunnel's upward copies), each upstream connection's, and the tunnel's downward copies. Held
// only while bytes move: an idle connection gives its blocks back.
inline constexpr std::size_t relay_buffer_bytes = 64 * 1024;
// Body bytes an HTTP/2 stream may have given and not yet sent (the peer's window decides how
// fast they go) before it waits: what bounds a connection's memory with a slow reader, both
// toward clients (h2_connection) and toward upstreams (h2_upstream).
inline constexpr std::size_t max_unsent_per_h2_stream = 256 * 1024;
// A request body this small that is all here already (an API call's JSON comes with its head)
// goes up before the response is read, in the exchange's own frame: so few bytes that writing
// them never waits on an upstream that answers before it reads (an HTTP/2 stream takes up to
// max_unsent_per_h2_stream before it waits, whatever the peer's window; on HTTP/1.1 they fit in
// the socket's buffers). Any other body is pumped beside the response.
inline constexpr std::size_t inline_request_body_bytes = 16 * 1024;
// A tunnel direction switches from copying to splice(2) after this many reads in a row of at
// least splice_read_bytes: a bulk transfer. Small exchanges (API calls, a TLS handshake) stay on
// the copy path, which is cheaper than splice for a few hundred bytes at a time.
inline constexpr int splice_after_large_reads = 4;
inline constexpr std::size_t splice_read_bytes = 16 * 1024;
// A tunnel direction's kernel pipe (splice): pages are only taken while bytes are in flight, and
// the kernel's per-user pipe quota falls back to its 64 KiB default when exhausted.
inline constexpr std::size_t tunnel_pipe_bytes = 512 * 1024;

// A WebSocket message, fragments joined, each way (docs/security-model.md): it is inspected whole,
// so it is held whole. An LLM request carrying a long conversation runs to a few MiB; beyond the
// limit the connection is closed with 1009 (message too big).
inline constexpr std::size_t max_websocket_message = 16 * 1024 * 1024;

// Interim (1xx) responses before the final one; beyond it the exchange ends with 502.
inline constexpr int max_interim_responses = 16;

// Every body held whole at once, across all connections (held_bytes): beyond it a request that
// needs its body read whole (request_plan::whole_body, up to 32 MiB each) gets 503 overloaded,
// and a WebSocket whose message in progress would pass it is closed with 1013. Sixteen such
// bodies at once would otherwise hold 512 MiB.
inline constexpr std::size_t max_held_body_bytes = 256 * 1024 * 1024;

// A request body under a Content-Encoding is decoded for the checks (docs/security-model.md), as it
// streams. What it decodes to is bounded (larger than any API request an agent makes: a long LLM
// conversation is a few MiB), and so is how much it outgrows its coded bytes once past the
// first MiB (zstd and brotli reach ~1000:1 only on filler; real JSON stays under 50:1); beyond
// either the client gets 413 body_too_large. A decompression bomb stops there, having decoded
// at most that much.
inline constexpr std::size_t max_decoded_body_bytes = 64 * 1024 * 1024;
inline constexpr std::size_t decoding_ratio_free_bytes = 1024 * 1024;
inline constexpr std::size_t max_decoding_ratio = 1000;
// Coded bytes held back until what they decode to has been searched: a zstd block (at most
// 128 KiB) waits whole, and the search holds back a value's length. Past this, coded bytes that
// decode to nothing searchable (a huge zstd skippable frame) get 415 unsupported_encoding.
inline constexpr std::size_t max_withheld_coded_bytes = 1024 * 1024;

// Connections served at once; beyond this new connections are answered 503 and closed. An idle
// one costs ~20 KiB (tunnel) to ~25 KiB (intercepted, TLS) of broker memory, so the limit bounds
// that at ~400 MiB. Each takes two descriptors (client, upstream; two more for a splice pipe
// while a tunnel moves bulk, or it copies): the server raises its soft RLIMIT_NOFILE toward the
// hard one and, if that is still short, serves fewer (server.cpp, connection_limit).
inline constexpr std::size_t max_connections = 16384;

}  // namespace broker::proxy::limits
