// The server side of one HTTP/2 connection (RFC 9113; docs/architecture.md) on nghttp2, without
// I/O: the connection feeds it what the client sent (receive()) and writes what it gives
// (output()). nghttp2 does the framing, HPACK, flow control and the protocol's own checks
// (pseudo-header rules, content-length against DATA, connection-specific fields); this wrapper
// turns streams into requests for its handler, answers them as the handler says, and enforces the
// broker's own limits: concurrent streams, the header list, and floods of frames that cost work and
// carry nothing (PING, SETTINGS, PRIORITY, empty DATA or header frames, CONTINUATION, client
// resets). A flood ends the connection with GOAWAY ENHANCE_YOUR_CALM; what nghttp2 would otherwise
// do for rapid reset (GOAWAY INTERNAL_ERROR) or a CONTINUATION flood (a fatal error, no GOAWAY) is
// only the backstop behind these counters.
//
// Request bodies are not acknowledged until the handler has taken them (consumed()), so a client
// can have at most a stream window per stream and a connection window in flight: the memory a
// connection holds is bounded by those windows and the handler's own buffers.
//
// Single-threaded: every call, and every handler callback (made from inside receive()), on the
// connection's thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "http/message.hpp"

struct nghttp2_session;

namespace broker::http {

class h2_memory;

struct h2_limits {
  // Streams open at once (SETTINGS_MAX_CONCURRENT_STREAMS). A client over it before it has
  // acknowledged the setting gets its new streams refused (RST_STREAM REFUSED_STREAM; refused
  // persistently, GOAWAY ENHANCE_YOUR_CALM); after, it breaks the limit it agreed to, and
  // nghttp2 ends the connection (GOAWAY PROTOCOL_ERROR).
  std::uint32_t max_concurrent_streams = 100;
  // A request's header list: each field's name, value and 32 bytes (RFC 9113 §6.5.2), and the
  // number of fields. Over either, the stream is answered 431 (the HPACK state stays in step).
  std::size_t max_header_list_bytes = 64 * 1024;
  std::size_t max_header_fields = 100;
  // Flow control: what a client may send before the broker has taken it.
  std::int32_t stream_window = 64 * 1024;
  std::int32_t connection_window = 1024 * 1024;
  // Per second of the clock receive() is given, beyond which the connection is told to calm
  // down (GOAWAY ENHANCE_YOUR_CALM): control frames (PING, SETTINGS, PRIORITY, GOAWAY and
  // unknown types; not WINDOW_UPDATE, which a fast download sends many of and nghttp2 handles
  // in place), empty frames that do not end anything, streams the client resets, and streams
  // refused for concurrency. Below nghttp2's own ceiling of 1,000 queued acknowledgements.
  std::uint32_t max_control_frames_per_second = 500;
  std::uint32_t max_empty_frames_per_second = 100;
  std::uint32_t max_resets_per_second = 200;
  std::uint32_t max_refused_per_second = 100;
  // CONTINUATION frames in one header block (CVE-2024-27316): a 64 KiB header list needs at
  // most 4 frames of the default 16 KiB.
  std::uint32_t max_continuations = 8;
};

// One request as the client sent it: its head (method, target, fields; a Host field made from
// :authority when the client sent none, Cookie fields joined as RFC 9113 §8.2.3 says) and the
// pseudo-headers the head has no place for.
struct h2_request {
  message_head head;
  std::string scheme;     // :scheme
  std::string authority;  // :authority
};

class h2_server_session {
 public:
  class handler {
   public:
    virtual ~handler() = default;
    // A new request; `end_stream`: it has no body. The stream is the handler's to answer.
    virtual void on_request(std::int32_t stream, h2_request request, bool end_stream) = 0;
    // A request whose header list was over the limits: answer it (431), its head is not kept.
    virtual void on_head_too_large(std::int32_t stream) = 0;
    // Body bytes (valid during the call only); `last` when the client ended the stream. Give
    // them back with consumed() once taken, or the client stops at its window.
    virtual void on_data(std::int32_t stream, std::string_view data, bool last) = 0;
    // Trailer fields: the request's end.
    virtual void on_trailers(std::int32_t stream, std::vector<header_field> fields) = 0;
    // The stream is gone before the handler finished it (RST_STREAM from the client with its
    // error code, or the connection ending): whatever works for it stops.
    virtual void on_reset(std::int32_t stream, std::uint32_t error_code) = 0;
  };

  using clock = std::chrono::steady_clock;

  h2_server_session(handler& h, h2_limits limits = {});
  ~h2_server_session();
  h2_server_session(const h2_server_session&) = delete;
  h2_server_session& operator=(const h2_server_session&) = delete;

  // What the client sent (the connection preface first). False once the session has failed or
  // has nothing more to read: stop reading, send what output() has, then close.
  bool receive(std::string_view bytes, clock::time_point now);
  // The bytes to send now (frames, in order), at most `max` of them; empty when none.
  std::string output(std::size_t max = 64 * 1024);
  bool wants_read() const;
  bool wants_write() const;

  // The response head (:status and fields; connection-specific fields are left out);
  // `end_stream`: no body follows.
  void respond(std::int32_t stream, const message_head& head, bool end_stream);
  // Body bytes after respond(); `last` ends the stream (unless trailers follow).
  void send_data(std::int32_t stream, std::string_view data, bool last);
  // Trailer fields: the stream's end, after every byte of its body.
  void send_trailers(std::int32_t stream, const std::vector<header_field>& fields);
  // Response bytes given and not yet sent (waiting for the client's window).
  std::size_t unsent(std::int32_t stream) const;
  // Ends the stream at once (RST_STREAM), e.g. CANCEL, or INTERNAL_ERROR for a response cut
  // short: never END_STREAM for a body that is not whole.
  void reset(std::int32_t stream, std::uint32_t error_code);
  // The handler has taken `bytes` of the stream's body: the client may send as many more.
  void consumed(std::int32_t stream, std::size_t bytes);

  // No new streams (GOAWAY NO_ERROR); the ones open go on to their end.
  void shut_down();
  // Ends the connection for misbehaving: GOAWAY ENHANCE_YOUR_CALM, nothing more is read.
  void calm_down();
  // Why the session ended on its own (a flood, a protocol error), or "" while it goes on.
  const std::string& failure() const { return failure_; }

  // Bytes this session holds: nghttp2's allocations and the unsent response bytes.
  std::size_t memory() const;

 private:
  struct stream_state;
  struct callbacks;
  struct budget {
    clock::time_point since{};
    std::uint32_t count = 0;
  };
  // Counts one event against `b`'s limit per second; false (and calm()) when over it.
  bool spend(budget& b, std::uint32_t per_second, const char* what);
  // calm_down(), saying why.
  void calm(const std::string& why);
  // The request whose header block has ended, to the handler.
  void deliver_request(std::int32_t id, stream_state& st, bool end_stream);
  stream_state* find(std::int32_t stream);
  const stream_state* find(std::int32_t stream) const;

  handler& handler_;
  const h2_limits limits_;
  std::unique_ptr<h2_memory> memory_;  // before session_: it outlives the session
  nghttp2_session* session_ = nullptr;
  std::map<std::int32_t, std::unique_ptr<stream_state>> streams_;
  std::size_t unsent_bytes_ = 0;
  clock::time_point now_{};
  budget control_, empty_, resets_, refused_;
  std::uint32_t continuations_ = 0;  // in the header block being read
  std::string failure_;
};

}  // namespace broker::http
