#include "http/h2_session_io.hpp"

#include <nghttp2/nghttp2.h>

namespace broker::http {

bool h2_receive(nghttp2_session* session, std::string_view bytes, std::string& failure) {
  const auto read = nghttp2_session_mem_recv(
      session, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  if (read < 0) {
    if (failure.empty()) failure = nghttp2_strerror(static_cast<int>(read));
    // Fatal: nghttp2 may have queued a GOAWAY; nothing more is read.
    nghttp2_session_terminate_session(session, NGHTTP2_PROTOCOL_ERROR);
    return false;
  }
  return nghttp2_session_want_read(session) != 0;
}

std::string h2_output(nghttp2_session* session, std::size_t max, std::string& failure) {
  std::string out;
  while (out.size() < max) {
    const uint8_t* data = nullptr;
    const auto n = nghttp2_session_mem_send(session, &data);
    if (n <= 0) {
      if (n < 0 && failure.empty()) failure = nghttp2_strerror(static_cast<int>(n));
      break;
    }
    out.append(reinterpret_cast<const char*>(data), static_cast<std::size_t>(n));
  }
  return out;
}

}  // namespace broker::http
