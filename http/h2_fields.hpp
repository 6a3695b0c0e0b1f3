// Header fields to and from nghttp2's form, for both sides of HTTP/2 (h2_server_session,
// h2_client_session): lower-case names, and none of the fields that are about a connection.
#pragma once

#include <nghttp2/nghttp2.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "http/message.hpp"

namespace broker::http {

// RFC 9113 §8.2.2: fields that are about a connection, never sent in HTTP/2: the hop-by-hop
// ones (is_hop_by_hop_field), but TE when it says "trailers", and Transfer-Encoding.
bool connection_specific(const header_field& field);

// head.content_length from its Content-Length field, when it has a valid one (nghttp2 has
// already checked it against the DATA that follows).
void take_content_length(message_head& head);

// A header block for nghttp2 (which copies it): `pseudo` fields (":status", or ":method" and the
// rest) in front, then `fields` with lower-case names and without the connection-specific ones.
// It points into `fields` (only names with upper-case letters are copied, lowered): it is
// submitted while they are alive.
struct header_block {
  std::vector<std::pair<std::string, std::string>> pseudo;
  std::vector<std::string> lowered;  // the names that were not lower-case already
  std::vector<nghttp2_nv> nv;

  // `skip`: fields left out besides the connection-specific ones.
  header_block(const std::vector<header_field>& fields,
               std::vector<std::pair<std::string, std::string>> pseudo = {},
               bool (*skip)(const header_field&) = nullptr);
};

}  // namespace broker::http
