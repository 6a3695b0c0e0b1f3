// Bytes in and out of an nghttp2 session, for both sides of HTTP/2 (h2_server_session,
// h2_client_session): what they share of nghttp2's memory-buffer I/O.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

struct nghttp2_session;

namespace broker::http {

// Feeds `bytes` to the session. On a fatal error, `failure` says why (unless it already says
// something) and the session is ended; false then, or when it has nothing more to read.
bool h2_receive(nghttp2_session* session, std::string_view bytes, std::string& failure);
// The frames the session has to send, at most `max` bytes of them; "" when none.
std::string h2_output(nghttp2_session* session, std::size_t max, std::string& failure);

}  // namespace broker::http
