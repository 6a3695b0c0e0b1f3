#include "http/h2_session_setup.hpp"

#include <iterator>
#include <new>

namespace broker::http {

nghttp2_session* make_h2_session(const h2_session_setup& setup, void* user, h2_memory& memory) {
  nghttp2_session_callbacks* cbs = nullptr;
  nghttp2_option* options = nullptr;
  if (nghttp2_session_callbacks_new(&cbs) != 0) throw std::bad_alloc();
  if (nghttp2_option_new(&options) != 0) {
    nghttp2_session_callbacks_del(cbs);
    throw std::bad_alloc();
  }
  if (setup.on_begin_frame)
    nghttp2_session_callbacks_set_on_begin_frame_callback(cbs, setup.on_begin_frame);
  nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, setup.on_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(cbs, setup.on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, setup.on_frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, setup.on_data_chunk);
  nghttp2_session_callbacks_set_on_stream_close_callback(cbs, setup.on_stream_close);
  if (setup.on_frame_send)
    nghttp2_session_callbacks_set_on_frame_send_callback(cbs, setup.on_frame_send);
  nghttp2_option_set_no_auto_window_update(options, 1);
  nghttp2_option_set_no_closed_streams(options, 1);
  if (setup.options) setup.options(options);
  nghttp2_session* session = nullptr;
  const int made = setup.server
                       ? nghttp2_session_server_new3(&session, cbs, user, options, memory.mem())
                       : nghttp2_session_client_new3(&session, cbs, user, options, memory.mem());
  nghttp2_option_del(options);
  nghttp2_session_callbacks_del(cbs);
  if (made != 0) throw std::bad_alloc();
  nghttp2_submit_settings(session, NGHTTP2_FLAG_NONE, setup.settings.data(), setup.settings.size());
  nghttp2_session_set_local_window_size(session, NGHTTP2_FLAG_NONE, 0, setup.connection_window);
  return session;
}

}  // namespace broker::http
