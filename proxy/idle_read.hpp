// Reading on a connection that may sit idle for a long time (a kept-alive client between
// requests, a quiet tunnel, a WebSocket): while nothing has arrived it holds no read buffer block,
// so 2,000 idle connections cost their sockets and coroutine frames, not 2,000 x 64 KiB.
#pragma once

#include <cstddef>
#include <tuple>

#include "base/asio.hpp"
#include "proxy/read_buffer.hpp"
#include "proxy/stream.hpp"

namespace broker::proxy {

// Reads what arrives next into `into` and commits it (n bytes, 0 on an error). When `into` is
// empty its block is given back first, and taken again once bytes are there:
// - a TCP socket is read without waiting (MSG_DONTWAIT) and only on EAGAIN waits for readiness,
//   so a busy connection pays no extra system call;
// - TLS first reads into a small probe in the coroutine frame: bytes already decrypted or
//   buffered by the TLS layer are never waited for, and OpenSSL holds the rest of the record.
// EOF comes back as asio::error::eof, as from read_some.
asio::awaitable<std::tuple<error_code, std::size_t>> read_idle(tcp::socket& from,
                                                               read_buffer& into);
asio::awaitable<std::tuple<error_code, std::size_t>> read_idle(stream& from, read_buffer& into);

}  // namespace broker::proxy
