// The CONNECT tunnel: bytes relayed both ways until both sides have closed, a half-close passed
// on as a shutdown, an error on either side ending both, and an idle deadline over the whole.
#pragma once

#include <cstdint>

#include "base/asio.hpp"
#include "base/deadline.hpp"
#include "live/timeouts.hpp"
#include "proxy/read_buffer.hpp"

namespace broker::proxy {

// `early` holds bytes the client sent behind its CONNECT head; they go upstream first.
// Returns when both directions are done (or one failed). The counters (client->upstream and
// upstream->client) are updated as bytes move, so they are right even if the relay is cancelled.
asio::awaitable<void> relay_tunnel(tcp::socket& client, tcp::socket& upstream, read_buffer& early,
                                   live::connection_deadline& idle,
                                   live::connection_deadline::clock::duration idle_timeout,
                                   std::uint64_t& bytes_out, std::uint64_t& bytes_in);

}  // namespace broker::proxy
