// The Asio names every room that runs coroutines uses (proxy, gateway), in the project's own
// namespace so that each room writes `asio::`, `tcp` and `use_tuple` alike. Keep it out of
// headers that many files include (it is slow to compile).
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

namespace broker {

namespace asio = boost::asio;
using asio::ip::tcp;
using error_code = boost::system::error_code;
// Expected outcomes (EOF, aborted) come back as values, not exceptions.
inline constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

}  // namespace broker
