// The CONNECT tunnel: bytes relayed both ways until both sides have closed, a half-close passed
// on as a shutdown, an error on either side ending both, and an idle deadline over the whole.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

#include "base/asio.hpp"
#include "base/deadline.hpp"
#include "live/timeouts.hpp"
#include "proxy/read_buffer.hpp"

namespace broker::proxy {

// `early` holds bytes the client sent behind its CONNECT head; they go upstream first.
// Returns when both directions are done (or one failed). The counters (client->upstream and
// upstream->client) are updated as bytes move, so they are right even if the relay is cancelled.
// `upstream_watch`, when set, sees the upstream's bytes before the client does, until it returns
// false (an ssh tunnel's key exchange: ssh/tunnel_join.hpp); they are copied, never spliced,
// while it looks.
using byte_watch = std::function<bool(std::string_view)>;
asio::awaitable<void> relay_tunnel(tcp::socket& client, tcp::socket& upstream, read_buffer& early,
                                   live::connection_deadline& idle,
                                   live::connection_deadline::clock::duration idle_timeout,
                                   std::uint64_t& bytes_out, std::uint64_t& bytes_in,
                                   byte_watch upstream_watch = {});

}  // namespace broker::proxy
