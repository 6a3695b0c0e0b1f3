#include "http/h2_client_session.hpp"

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "http/h2_fields.hpp"
#include "http/h2_memory.hpp"
#include "http/h2_session_io.hpp"
#include "http/h2_session_setup.hpp"

namespace broker::http {

// What one stream holds: the request body being sent, the response being read.
struct h2_client_session::stream_state {
  std::string out;  // request body bytes not yet framed
  bool out_last = false;
  message_head head;  // the response head (or trailers) while its header block arrives
  std::size_t header_bytes = 0;
  std::size_t header_fields = 0;
  bool too_large = false;
  bool bad_status = false;     // :status outside 100-599 (RFC 9110 §15)
  bool final_head = false;     // a final (non-1xx) head has arrived
  bool ended = false;          // the response ended (END_STREAM)
  bool handler_done = false;   // reset() by the handler: it is not told of it
  std::uint32_t refused = 0;   // the RST_STREAM code sent for a response not taken
  std::size_t unconsumed = 0;  // body bytes given to the handler, not yet consumed()
};

// The nghttp2 callbacks: each finds the session in user_data and does one small thing.
struct h2_client_session::callbacks {
  static h2_client_session& of(void* user_data) {
    return *static_cast<h2_client_session*>(user_data);
  }

  // A response not taken: the stream ends in RST_STREAM, and its handler is told that code when
  // it closes (even where the upstream had ended the stream already).
  static void refuse(nghttp2_session* session, std::int32_t id, stream_state& st,
                     std::uint32_t code) {
    st.refused = code;
    nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, id, code);
  }
  // A malformed response (RFC 9113 §8.1.1).
  static void malformed(nghttp2_session* session, std::int32_t id, stream_state& st) {
    refuse(session, id, st, NGHTTP2_PROTOCOL_ERROR);
  }

  static int on_begin_headers(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
    if (auto* st = of(user_data).find(frame->hd.stream_id)) {
      st->head = {};
      st->head.headers.reserve(16);  // a usual response's fields at once
      st->header_bytes = st->header_fields = 0;
      st->bad_status = false;
    }
    return 0;
  }

  static int on_header(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name_bytes,
                       size_t name_size, const uint8_t* value_bytes, size_t value_size, uint8_t,
                       void* user_data) {
    auto& s = of(user_data);
    auto* st = s.find(frame->hd.stream_id);
    if (!st || st->too_large) return 0;
    const std::string_view name(reinterpret_cast<const char*>(name_bytes), name_size);
    const std::string_view value(reinterpret_cast<const char*>(value_bytes), value_size);
    st->header_bytes += name.size() + value.size() + 32;
    if (st->header_bytes > s.limits_.max_header_list_bytes ||
        ++st->header_fields > s.limits_.max_header_fields) {
      st->too_large = true;
      return 0;  // still decoded, so HPACK stays in step; the stream is reset at its end
    }
    if (name == ":status") {
      // nghttp2 has checked for three digits, and calls every status outside 1xx final: one
      // outside 100-599 would be a head that is final to it and interim here, its body bytes
      // before a final head.
      char* end = nullptr;
      const long status = std::strtol(std::string(value).c_str(), &end, 10);
      st->head.status = static_cast<int>(status);
      st->bad_status = status < 100 || status > 599;
    } else if (!name.starts_with(':')) {
      st->head.headers.push_back({std::string(name), std::string(value)});
    }
    return 0;
  }

  static int on_frame_recv(nghttp2_session* session, const nghttp2_frame* frame, void* user_data) {
    auto& s = of(user_data);
    if (frame->hd.type == NGHTTP2_GOAWAY) {
      s.goaway_ = true;
      if (s.failure_.empty()) s.failure_ = "the upstream said GOAWAY";
      return 0;
    }
    const std::int32_t id = frame->hd.stream_id;
    auto* st = s.find(id);
    if (!st) return 0;
    const bool end_stream = frame->hd.flags & NGHTTP2_FLAG_END_STREAM;
    if (frame->hd.type == NGHTTP2_HEADERS && (frame->hd.flags & NGHTTP2_FLAG_END_HEADERS)) {
      if (st->too_large) {
        refuse(session, id, *st, NGHTTP2_INTERNAL_ERROR);
        return 0;
      }
      if (st->bad_status) {
        malformed(session, id, *st);
        return 0;
      }
      if (end_stream) st->ended = true;
      if (st->final_head) {
        s.handler_.on_trailers(id, std::move(st->head.headers));
        return 0;
      }
      auto& head = st->head;
      head.version_major = 2;
      head.version_minor = 0;
      if (head.status >= 200) st->final_head = true;
      head.has_body = !end_stream;
      take_content_length(head);
      head.fit();
      s.handler_.on_response(id, std::move(head), end_stream);
    } else if (frame->hd.type == NGHTTP2_DATA && end_stream) {
      if (!st->final_head) {
        malformed(session, id, *st);
        return 0;
      }
      st->ended = true;
      s.handler_.on_data(id, {}, true);
    }
    return 0;
  }

  static int on_data_chunk(nghttp2_session* session, uint8_t, int32_t id, const uint8_t* data,
                           size_t size, void* user_data) {
    auto& s = of(user_data);
    auto* st = s.find(id);
    if (!st || st->handler_done || !st->final_head) {
      nghttp2_session_consume(session, id, size);  // nobody takes these bytes
      // Body before a final head. nghttp2 resets the stream itself for DATA after a 1xx head
      // or before any; this holds whatever else it lets through.
      if (st && !st->final_head && !st->handler_done) malformed(session, id, *st);
      return 0;
    }
    st->unconsumed += size;
    s.handler_.on_data(id, {reinterpret_cast<const char*>(data), size}, false);
    return 0;
  }

  static int on_stream_close(nghttp2_session* session, int32_t id, uint32_t error_code,
                             void* user_data) {
    auto& s = of(user_data);
    const auto it = s.streams_.find(id);
    if (it == s.streams_.end()) return 0;
    auto st = std::move(it->second);
    s.streams_.erase(it);
    s.unsent_bytes_ -= st->out.size();
    if (st->unconsumed > 0) nghttp2_session_consume_connection(session, st->unconsumed);
    if (!st->handler_done && !st->ended) {
      if (error_code == NGHTTP2_NO_ERROR)
        error_code = st->refused != 0 ? st->refused : std::uint32_t{NGHTTP2_CANCEL};
      s.handler_.on_reset(id, error_code);
    }
    return 0;
  }

  // The request body's source: the stream's unsent bytes.
  static ssize_t read_body(nghttp2_session*, int32_t id, uint8_t* buf, size_t length,
                           uint32_t* flags, nghttp2_data_source*, void* user_data) {
    auto& s = of(user_data);
    auto* st = s.find(id);
    if (!st) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    const std::size_t n = std::min(length, st->out.size());
    std::memcpy(buf, st->out.data(), n);
    st->out.erase(0, n);
    s.unsent_bytes_ -= n;
    if (!st->out.empty()) return static_cast<ssize_t>(n);
    if (!st->out_last) return n > 0 ? static_cast<ssize_t>(n) : ssize_t{NGHTTP2_ERR_DEFERRED};
    *flags |= NGHTTP2_DATA_FLAG_EOF;
    return static_cast<ssize_t>(n);
  }
};

h2_client_session::h2_client_session(handler& h) : h2_client_session(h, limits{}) {}

h2_client_session::h2_client_session(handler& h, limits l)
    : handler_(h), limits_(l), memory_(std::make_unique<h2_memory>()) {
  session_ = make_h2_session(
      {.server = false,
       .on_begin_headers = callbacks::on_begin_headers,
       .on_header = callbacks::on_header,
       .on_frame_recv = callbacks::on_frame_recv,
       .on_data_chunk = callbacks::on_data_chunk,
       .on_stream_close = callbacks::on_stream_close,
       // Until the upstream's SETTINGS say otherwise (nghttp2 would assume no limit).
       .options =
           [this](nghttp2_option* options) {
             nghttp2_option_set_peer_max_concurrent_streams(options,
                                                            limits_.max_concurrent_streams);
           },
       .settings = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
                    {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE,
                     static_cast<std::uint32_t>(limits_.stream_window)},
                    {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE,
                     static_cast<std::uint32_t>(limits_.max_header_list_bytes)},
                    {NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1}},
       .connection_window = static_cast<std::int32_t>(limits_.connection_window)},
      this, *memory_);
}

h2_client_session::~h2_client_session() {
  // Closing streams now must not call the handler, which may be gone first.
  streams_.clear();
  nghttp2_session_del(session_);
}

h2_client_session::stream_state* h2_client_session::find(std::int32_t stream) {
  return find_h2_stream(streams_, stream);
}

const h2_client_session::stream_state* h2_client_session::find(std::int32_t stream) const {
  return find_h2_stream(streams_, stream);
}

bool h2_client_session::can_start() const {
  if (goaway_ || !failure_.empty() || !nghttp2_session_want_read(session_)) return false;
  const auto allowed = std::min<std::uint32_t>(
      limits_.max_concurrent_streams,
      nghttp2_session_get_remote_settings(session_, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS));
  return streams_.size() < allowed && nghttp2_session_get_next_stream_id(session_) < (1u << 31) - 2;
}

std::int32_t h2_client_session::request(const message_head& head, const std::string& scheme,
                                        const std::string& authority, const std::string& path,
                                        bool end_stream) {
  if (!can_start()) return 0;
  std::string where = authority;
  if (where.empty())
    if (const std::string* host = head.find("host")) where = *host;
  const header_block block(
      head.headers,
      {{":method", head.method}, {":scheme", scheme}, {":authority", where}, {":path", path}},
      [](const header_field& f) { return iequals(f.name, "host"); });  // Host is :authority
  auto st = std::make_unique<stream_state>();
  st->out_last = end_stream;
  nghttp2_data_provider provider{};
  provider.read_callback = callbacks::read_body;
  const auto id = nghttp2_submit_request(session_, nullptr, block.nv.data(), block.nv.size(),
                                         end_stream ? nullptr : &provider, nullptr);
  if (id <= 0) {
    if (failure_.empty()) failure_ = nghttp2_strerror(id);
    return 0;
  }
  streams_[id] = std::move(st);
  return id;
}

void h2_client_session::send_data(std::int32_t stream, std::string_view data, bool last) {
  auto* st = find(stream);
  if (!st || st->out_last) return;
  st->out.append(data);
  unsent_bytes_ += data.size();
  st->out_last = last;
  nghttp2_session_resume_data(session_, stream);
}

std::size_t h2_client_session::unsent(std::int32_t stream) const {
  const auto* st = find(stream);
  return st ? st->out.size() : 0;
}

void h2_client_session::reset(std::int32_t stream, std::uint32_t error_code) {
  auto* st = find(stream);
  if (!st) return;
  st->handler_done = true;
  nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, stream, error_code);
}

void h2_client_session::consumed(std::int32_t stream, std::size_t bytes) {
  auto* st = find(stream);
  if (!st) return;
  bytes = std::min(bytes, st->unconsumed);
  st->unconsumed -= bytes;
  nghttp2_session_consume(session_, stream, bytes);
}

bool h2_client_session::receive(std::string_view bytes) {
  return h2_receive(session_, bytes, failure_);
}

std::string h2_client_session::output(std::size_t max) {
  return h2_output(session_, max, failure_);
}

bool h2_client_session::wants_read() const {
  return nghttp2_session_want_read(session_) != 0;
}

bool h2_client_session::wants_write() const {
  return nghttp2_session_want_write(session_) != 0;
}

void h2_client_session::shut_down() {
  goaway_ = true;
  nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE, 0, NGHTTP2_NO_ERROR, nullptr, 0);
}

std::size_t h2_client_session::memory() const {
  return memory_->bytes() + unsent_bytes_;
}

}  // namespace broker::http
