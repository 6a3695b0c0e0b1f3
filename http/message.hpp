// The HTTP/1.1 message model shared by proxy/ and brokers/: a parsed head (request or response
// line, header fields in order), its serialization back to wire form, and the header-name rules
// (case-insensitive names, comma-separated token lists, hop-by-hop fields; RFC 9110).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace broker::http {

struct header_field {
  std::string name;
  std::string value;
};

struct message_head {
  // Requests
  std::string method;
  std::string target;
  // Responses
  int status = 0;
  std::string reason;

  int version_major = 1;
  int version_minor = 1;
  std::vector<header_field> headers;
  bool keep_alive = true;  // llhttp_should_keep_alive after the head
  bool upgrade = false;
  bool has_body = false;  // Content-Length > 0, chunked, or (responses) read-until-close
  bool chunked = false;
  std::optional<std::uint64_t> content_length;

  // First value of a header, case-insensitive name.
  const std::string* find(std::string_view name) const;
  // Does any `name` header list `token` (a comma-separated list, case-insensitive)?
  bool has_token(std::string_view name, std::string_view token) const;
  // The elements of every `name` field in order, as one list (RFC 9110 §5.3: repeated fields
  // of a list-based header are one comma-separated list); whitespace trimmed, empty elements
  // dropped. Views into the head.
  std::vector<std::string_view> list(std::string_view name) const;
  // Once the head is whole: the room reserved for fields it did not use is given back, but for
  // two (a proxy adds a field or two). A head lives as long as its exchange, a streamed answer's
  // for minutes.
  void fit();
};

// Serializes a head back to wire form ("METHOD target HTTP/1.1", or HTTP/1.0 for a 1.0
// request; responses always as HTTP/1.1), hop-by-hop headers dropped, ending with the blank line.
std::string serialize_request_head(const message_head& head, std::string_view target);
std::string serialize_response_head(const message_head& head);

// A chunk-size line ("1a\r\n") for a chunk of `size` bytes, appended to `wire`.
void append_chunk_size(std::string& wire, std::size_t size);
// Decoded body bytes back to wire form, appended to `wire`: a chunk of their own under chunked
// coding (none for empty data), as they are otherwise. The last piece of a chunked body gets the
// terminating zero chunk.
void frame_body(std::string& wire, std::string_view data, bool chunked, bool last);

// The hop-by-hop fields (RFC 9110 §7.6.1) no message forwards, whatever its Connection field
// lists: Connection and the fields of its kind (Keep-Alive, Proxy-Connection, TE, Upgrade) and
// the proxy's own Proxy-Authorization and Proxy-Authenticate. The one list: HTTP/1.1's heads
// (serialize_*_head) and HTTP/2's header blocks (h2_fields.hpp) both leave them out.
bool is_hop_by_hop_field(std::string_view name);

// True for the hop-by-hop headers a proxy must not forward: the list above and the names
// listed in `Connection`. Framing headers (Content-Length, Transfer-Encoding) are kept: bodies
// are relayed as framed.
bool is_hop_by_hop(std::string_view name, const message_head& head);

// What keeps a message's body, once chunked framing is removed, from being its plain content:
// "Content-Encoding: gzip" or "Transfer-Encoding: gzip, chunked" (every field of either header
// counts), or "" when nothing does. Used where a body must be read as plain bytes (scrubbing).
std::string coded_body(const message_head& head);

bool iequals(std::string_view a, std::string_view b);

// The reason phrase RFC 9110 §15 gives a status code; "" for one it does not name (HTTP/1.1
// allows an empty phrase, and HTTP/2 has none: a response from an HTTP/2 upstream gets this one
// before an HTTP/1.1 client sees it).
std::string_view status_text(int status);

}  // namespace broker::http
