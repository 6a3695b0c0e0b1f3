// The Asio names the proxy uses. Included only by proxy/ translation units that run coroutines;
// keep it out of headers that many files include (it is slow to compile).
#pragma once

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

namespace broker::proxy {

namespace asio = boost::asio;
using asio::ip::tcp;
using error_code = boost::system::error_code;
// Expected outcomes (EOF, aborted) come back as values, not exceptions (STYLE §5).
inline constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

}  // namespace broker::proxy
