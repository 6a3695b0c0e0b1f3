// An nghttp2 session made the way both sides of HTTP/2 make theirs (h2_server_session toward a
// client, h2_client_session toward an upstream): the side's callbacks, nghttp2's automatic
// WINDOW_UPDATEs and closed-stream bookkeeping off (each side acknowledges what its handler has
// taken), the side's own options, then its SETTINGS and connection window queued first.
#pragma once

#include <nghttp2/nghttp2.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "http/h2_memory.hpp"

namespace broker::http {

struct h2_session_setup {
  bool server = false;
  // The callbacks both sides set, and the two only a server sets (null: not set).
  nghttp2_on_begin_headers_callback on_begin_headers = nullptr;
  nghttp2_on_header_callback on_header = nullptr;
  nghttp2_on_frame_recv_callback on_frame_recv = nullptr;
  nghttp2_on_data_chunk_recv_callback on_data_chunk = nullptr;
  nghttp2_on_stream_close_callback on_stream_close = nullptr;
  nghttp2_on_begin_frame_callback on_begin_frame = nullptr;
  nghttp2_on_frame_send_callback on_frame_send = nullptr;
  // The side's own options, besides the two every side sets.
  std::function<void(nghttp2_option*)> options;
  std::vector<nghttp2_settings_entry> settings;
  std::int32_t connection_window = 0;  // the connection's receive window
};

// The session, its callbacks given `user`, its memory from `memory`. Throws std::bad_alloc when
// nghttp2 cannot make it.
nghttp2_session* make_h2_session(const h2_session_setup& setup, void* user, h2_memory& memory);

// The stream state `streams` (a map of id to owning pointer) holds for `id`; null when none.
template <class Streams>
auto* find_h2_stream(Streams& streams, std::int32_t id) {
  const auto it = streams.find(id);
  return it == streams.end() ? nullptr : it->second.get();
}

}  // namespace broker::http
