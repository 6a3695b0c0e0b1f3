// The client side of one HTTP/2 connection to an upstream (RFC 9113; docs/architecture.md) on
// nghttp2, without I/O, the counterpart of h2_server_session: the connection feeds it what the
// upstream sent (receive()) and writes what it gives (output()). Each request is a stream; its
// response head, body and trailers go to the handler. Response bodies are acknowledged only as the
// handler takes them (consumed()), so a slow client slows its upstream stream and nothing piles up
// here. The upstream's SETTINGS_MAX_CONCURRENT_STREAMS (at most 100 used) and GOAWAY say whether
// another stream may start (can_start()).
//
// Single-threaded: every call, and every handler callback (made from inside receive()), on the
// connection's thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "http/message.hpp"

struct nghttp2_session;

namespace broker::http {

class h2_memory;

class h2_client_session {
 public:
  class handler {
   public:
    virtual ~handler() = default;
    // A response head (interim ones too, status < 200); `end_stream`: no body follows.
    virtual void on_response(std::int32_t stream, message_head head, bool end_stream) = 0;
    // Body bytes (valid during the call only); `last` when the upstream ended the stream. Give
    // them back with consumed() once taken, or the upstream stops at its window.
    virtual void on_data(std::int32_t stream, std::string_view data, bool last) = 0;
    // Trailer fields: the response's end.
    virtual void on_trailers(std::int32_t stream, std::vector<header_field> fields) = 0;
    // The stream is gone before its response ended (RST_STREAM from the upstream with its error
    // code; one from this side for a response head over the limits, INTERNAL_ERROR, or for a
    // malformed response, PROTOCOL_ERROR: a :status outside 100-599, DATA before a final head,
    // a body not its content-length; or the connection ending). No body byte of a malformed
    // response reaches the handler.
    virtual void on_reset(std::int32_t stream, std::uint32_t error_code) = 0;
  };

  struct limits {
    std::uint32_t max_concurrent_streams = 100;  // used at most, whatever the upstream allows
    std::int32_t stream_window = 256 * 1024;
    std::int32_t connection_window = 4 * 1024 * 1024;
    std::size_t max_header_list_bytes = 64 * 1024;
    std::size_t max_header_fields = 200;
  };

  explicit h2_client_session(handler& h);
  h2_client_session(handler& h, limits l);
  ~h2_client_session();
  h2_client_session(const h2_client_session&) = delete;
  h2_client_session& operator=(const h2_client_session&) = delete;

  // A request: `head`'s method and fields (a Host field becomes :authority when `authority` is
  // empty), `path` its :path; `end_stream` when it has no body. The stream id, or 0 when no
  // stream can start (see can_start()).
  std::int32_t request(const message_head& head, const std::string& scheme,
                       const std::string& authority, const std::string& path, bool end_stream);
  // Request body bytes; `last` ends the stream.
  void send_data(std::int32_t stream, std::string_view data, bool last);
  // Request bytes given and not yet sent (waiting for the upstream's window).
  std::size_t unsent(std::int32_t stream) const;
  // Ends the stream at once (RST_STREAM, e.g. CANCEL when the client went away).
  void reset(std::int32_t stream, std::uint32_t error_code);
  // The handler has taken `bytes` of the stream's response body.
  void consumed(std::int32_t stream, std::size_t bytes);

  // What the upstream sent. False once the session has failed or has nothing more to read.
  bool receive(std::string_view bytes);
  // The bytes to send now (the connection preface first), at most `max`; empty when none.
  std::string output(std::size_t max = 64 * 1024);
  bool wants_read() const;
  bool wants_write() const;

  // Another stream may start: the upstream has not said GOAWAY, the session has not failed, and
  // fewer streams are open than it allows.
  bool can_start() const;
  std::size_t open_streams() const { return streams_.size(); }
  // No new streams from this side (GOAWAY NO_ERROR); the open ones go on.
  void shut_down();
  // Why the session ended (a GOAWAY, a protocol error), or "" while it goes on.
  const std::string& failure() const { return failure_; }
  // Bytes this session holds: nghttp2's allocations and the unsent request bytes.
  std::size_t memory() const;

 private:
  struct stream_state;
  struct callbacks;
  stream_state* find(std::int32_t stream);
  const stream_state* find(std::int32_t stream) const;

  handler& handler_;
  const limits limits_;
  std::unique_ptr<h2_memory> memory_;  // before session_: it outlives the session
  nghttp2_session* session_ = nullptr;
  std::map<std::int32_t, std::unique_ptr<stream_state>> streams_;
  std::size_t unsent_bytes_ = 0;
  bool goaway_ = false;
  std::string failure_;
};

}  // namespace broker::http
