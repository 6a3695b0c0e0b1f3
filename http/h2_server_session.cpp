#include "http/h2_server_session.hpp"

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

// What one stream holds: the request being read, the response being sent.
struct h2_server_session::stream_state {
  // The request's head while its header block arrives.
  h2_request request;
  std::string cookie;  // Cookie fields, joined at the end of the block
  std::size_t header_bytes = 0;
  std::size_t header_fields = 0;
  bool too_large = false;
  bool head_done = false;
  bool handler_done = false;   // reset() by the handler, or its response sent whole
  bool answered = false;       // the response's last frame has gone
  std::size_t unconsumed = 0;  // body bytes given to the handler, not yet consumed()
  // The response.
  std::string out;  // body bytes not yet framed
  bool out_last = false;
  std::optional<std::vector<header_field>> trailers;
  bool responded = false;
};

// The nghttp2 callbacks: each finds the session in user_data and does one small thing.
struct h2_server_session::callbacks {
  static h2_server_session& of(void* user_data) {
    return *static_cast<h2_server_session*>(user_data);
  }

  static int on_begin_frame(nghttp2_session*, const nghttp2_frame_hd* hd, void* user_data) {
    auto& s = of(user_data);
    const auto& limits = s.limits_;
    switch (hd->type) {
      case NGHTTP2_DATA:
        if (hd->length == 0 && !(hd->flags & NGHTTP2_FLAG_END_STREAM))
          s.spend(s.empty_, limits.max_empty_frames_per_second, "empty DATA frames");
        break;
      case NGHTTP2_HEADERS:
        s.continuations_ = 0;  // a header block starts; nothing may come between its frames
        if (hd->length == 0 && !(hd->flags & (NGHTTP2_FLAG_END_STREAM | NGHTTP2_FLAG_END_HEADERS)))
          s.spend(s.empty_, limits.max_empty_frames_per_second, "empty HEADERS frames");
        break;
      case NGHTTP2_CONTINUATION:
        if (hd->length == 0 && !(hd->flags & NGHTTP2_FLAG_END_HEADERS))
          s.spend(s.empty_, limits.max_empty_frames_per_second, "empty CONTINUATION frames");
        if (++s.continuations_ > limits.max_continuations)
          s.calm("a header block in too many CONTINUATION frames");
        break;
      case NGHTTP2_RST_STREAM:
        s.spend(s.resets_, limits.max_resets_per_second, "streams reset by the client");
        break;
      case NGHTTP2_WINDOW_UPDATE:
        break;
      case NGHTTP2_PING:
      case NGHTTP2_SETTINGS:
        if (hd->flags & NGHTTP2_FLAG_ACK) break;
        [[fallthrough]];
      case NGHTTP2_PRIORITY:
      default:  // extension frames are ignored, but they were sent
        s.spend(s.control_, limits.max_control_frames_per_second, "control frames");
        break;
    }
    return 0;
  }

  static int on_begin_headers(nghttp2_session* session, const nghttp2_frame* frame,
                              void* user_data) {
    auto& s = of(user_data);
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    if (s.streams_.size() >= s.limits_.max_concurrent_streams) {
      nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, frame->hd.stream_id,
                                NGHTTP2_REFUSED_STREAM);
      s.spend(s.refused_, s.limits_.max_refused_per_second, "streams over the concurrency limit");
      return 0;
    }
    auto st = std::make_unique<stream_state>();
    st->request.head.version_major = 2;
    st->request.head.version_minor = 0;
    // Room for a usual request's fields at once, rather than growing 1, 2, 4, 8, 16.
    st->request.head.headers.reserve(16);
    s.streams_[frame->hd.stream_id] = std::move(st);
    return 0;
  }

  static int on_header(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name_bytes,
                       size_t name_size, const uint8_t* value_bytes, size_t value_size, uint8_t,
                       void* user_data) {
    auto& s = of(user_data);
    auto* st = s.find(frame->hd.stream_id);
    if (!st || frame->hd.type != NGHTTP2_HEADERS) return 0;
    const std::string_view name(reinterpret_cast<const char*>(name_bytes), name_size);
    const std::string_view value(reinterpret_cast<const char*>(value_bytes), value_size);
    st->header_bytes += name.size() + value.size() + 32;
    ++st->header_fields;
    if (st->header_bytes > s.limits_.max_header_list_bytes ||
        st->header_fields > s.limits_.max_header_fields)
      st->too_large = true;
    if (st->too_large) return 0;  // still decoded, so HPACK stays in step; not kept
    auto& request = st->request;
    if (frame->headers.cat == NGHTTP2_HCAT_HEADERS && st->head_done) {
      request.head.headers.push_back({std::string(name), std::string(value)});  // trailers
    } else if (name == ":method") {
      request.head.method = value;
    } else if (name == ":path") {
      request.head.target = value;
    } else if (name == ":scheme") {
      request.scheme = value;
    } else if (name == ":authority") {
      request.authority = value;
    } else if (name == "cookie") {
      if (!st->cookie.empty()) st->cookie += "; ";
      st->cookie += value;
    } else if (!name.starts_with(':')) {
      request.head.headers.push_back({std::string(name), std::string(value)});
    }
    return 0;
  }

  static int on_frame_recv(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
    auto& s = of(user_data);
    const std::int32_t id = frame->hd.stream_id;
    auto* st = s.find(id);
    if (!st) return 0;
    const bool end_stream = frame->hd.flags & NGHTTP2_FLAG_END_STREAM;
    if (frame->hd.type == NGHTTP2_HEADERS && (frame->hd.flags & NGHTTP2_FLAG_END_HEADERS)) {
      if (!st->head_done) {
        st->head_done = true;
        if (st->too_large) {
          s.handler_.on_head_too_large(id);
          return 0;
        }
        s.deliver_request(id, *st, end_stream);
      } else if (!st->too_large) {
        auto trailers = std::move(st->request.head.headers);
        st->request.head.headers.clear();
        s.handler_.on_trailers(id, std::move(trailers));
      }
    } else if (frame->hd.type == NGHTTP2_DATA && end_stream && !st->too_large) {
      s.handler_.on_data(id, {}, true);
    }
    return 0;
  }

  static int on_data_chunk(nghttp2_session* session, uint8_t, int32_t id, const uint8_t* data,
                           size_t size, void* user_data) {
    auto& s = of(user_data);
    auto* st = s.find(id);
    if (!st || !st->head_done || st->too_large || st->answered) {
      // Nobody takes these bytes: the client may send as many more.
      nghttp2_session_consume(session, id, size);
      // Body before the request's head is malformed (RFC 9113 §8.1.1). nghttp2 ends the
      // connection for DATA on a stream with no HEADERS; this holds whatever else it lets through.
      if (st && !st->head_done)
        nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, id, NGHTTP2_PROTOCOL_ERROR);
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
    // What the handler never gave back still counts against the connection's window.
    if (st->unconsumed > 0) nghttp2_session_consume_connection(session, st->unconsumed);
    const bool answered_whole = st->responded && st->out_last && st->out.empty() && !st->trailers;
    if (st->head_done && !st->too_large && !st->handler_done && !answered_whole)
      s.handler_.on_reset(id, error_code);
    return 0;
  }

  // A response that ended before its request did: what the client sent and sends of the rest
  // of its body is given back at once, so it never holds the connection's window. (Not
  // RST_STREAM NO_ERROR, RFC 9113 §8.1: curl before 8.1 takes that for a failed transfer.)
  static int on_frame_send(nghttp2_session* session, const nghttp2_frame* frame, void* user_data) {
    const bool ends = (frame->hd.type == NGHTTP2_DATA || frame->hd.type == NGHTTP2_HEADERS) &&
                      (frame->hd.flags & NGHTTP2_FLAG_END_STREAM);
    if (!ends) return 0;
    auto* st = of(user_data).find(frame->hd.stream_id);
    if (!st) return 0;
    st->answered = true;
    if (st->unconsumed > 0) nghttp2_session_consume(session, frame->hd.stream_id, st->unconsumed);
    st->unconsumed = 0;
    return 0;
  }

  // The response body's source: the stream's unsent bytes.
  static ssize_t read_body(nghttp2_session* session, int32_t id, uint8_t* buf, size_t length,
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
    if (st->trailers) {
      *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
      const int submitted = [&] {
        const header_block block(*st->trailers);  // points into the trailers: submitted first
        return nghttp2_submit_trailer(session, id, block.nv.data(), block.nv.size());
      }();
      st->trailers.reset();
      if (submitted != 0) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    return static_cast<ssize_t>(n);
  }
};

h2_server_session::h2_server_session(handler& h, h2_limits limits)
    : handler_(h), limits_(limits), memory_(std::make_unique<h2_memory>()) {
  session_ = make_h2_session(
      {.server = true,
       .on_begin_headers = callbacks::on_begin_headers,
       .on_header = callbacks::on_header,
       .on_frame_recv = callbacks::on_frame_recv,
       .on_data_chunk = callbacks::on_data_chunk,
       .on_stream_close = callbacks::on_stream_close,
       .on_begin_frame = callbacks::on_begin_frame,
       .on_frame_send = callbacks::on_frame_send,
       // nghttp2's own limits stand behind the broker's counters, never before them.
       .options =
           [this](nghttp2_option* options) {
             nghttp2_option_set_max_continuations(options, limits_.max_continuations + 8);
             nghttp2_option_set_stream_reset_rate_limit(options,
                                                        2ull * limits_.max_resets_per_second + 1000,
                                                        limits_.max_resets_per_second);
           },
       .settings = {{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, limits_.max_concurrent_streams},
                    {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE,
                     static_cast<std::uint32_t>(limits_.stream_window)},
                    {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE,
                     static_cast<std::uint32_t>(limits_.max_header_list_bytes)},
                    {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
                    {NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1}},
       .connection_window = static_cast<std::int32_t>(limits_.connection_window)},
      this, *memory_);
}

h2_server_session::~h2_server_session() {
  // Closing streams now must not call the handler, which may be gone first.
  streams_.clear();
  nghttp2_session_del(session_);
}

h2_server_session::stream_state* h2_server_session::find(std::int32_t stream) {
  return find_h2_stream(streams_, stream);
}

const h2_server_session::stream_state* h2_server_session::find(std::int32_t stream) const {
  return find_h2_stream(streams_, stream);
}

void h2_server_session::deliver_request(std::int32_t id, stream_state& st, bool end_stream) {
  auto& request = st.request;
  auto& head = request.head;
  if (!st.cookie.empty()) head.headers.push_back({"cookie", std::move(st.cookie)});
  st.cookie.clear();
  if (!head.find("host") && !request.authority.empty())
    head.headers.insert(head.headers.begin(), {"host", request.authority});
  head.has_body = !end_stream;
  take_content_length(head);
  head.fit();  // after the fields added here
  h2_request out = std::move(request);
  request = {};
  handler_.on_request(id, std::move(out), end_stream);
}

bool h2_server_session::spend(budget& b, std::uint32_t per_second, const char* what) {
  if (now_ - b.since >= std::chrono::seconds(1)) {
    b.since = now_;
    b.count = 0;
  }
  if (++b.count <= per_second) return true;
  calm(std::string("too many ") + what);
  return false;
}

void h2_server_session::calm(const std::string& why) {
  if (failure_.empty()) failure_ = why;
  calm_down();
}

bool h2_server_session::receive(std::string_view bytes, clock::time_point now) {
  now_ = now;
  return h2_receive(session_, bytes, failure_);
}

std::string h2_server_session::output(std::size_t max) {
  return h2_output(session_, max, failure_);
}

bool h2_server_session::wants_read() const {
  return nghttp2_session_want_read(session_) != 0;
}

bool h2_server_session::wants_write() const {
  return nghttp2_session_want_write(session_) != 0;
}

void h2_server_session::respond(std::int32_t stream, const message_head& head, bool end_stream) {
  auto* st = find(stream);
  if (!st || st->responded) return;
  st->responded = true;
  header_block block(head.headers, {{":status", std::to_string(head.status)}});
  nghttp2_data_provider provider{};
  provider.read_callback = callbacks::read_body;
  if (end_stream) st->out_last = true;
  nghttp2_submit_response(session_, stream, block.nv.data(), block.nv.size(),
                          end_stream ? nullptr : &provider);
}

void h2_server_session::send_data(std::int32_t stream, std::string_view data, bool last) {
  auto* st = find(stream);
  if (!st || !st->responded || st->out_last) return;
  st->out.append(data);
  unsent_bytes_ += data.size();
  st->out_last = last;
  nghttp2_session_resume_data(session_, stream);
}

void h2_server_session::send_trailers(std::int32_t stream,
                                      const std::vector<header_field>& fields) {
  auto* st = find(stream);
  if (!st || !st->responded || st->out_last) return;
  st->trailers = fields;
  st->out_last = true;
  nghttp2_session_resume_data(session_, stream);
}

std::size_t h2_server_session::unsent(std::int32_t stream) const {
  const auto* st = find(stream);
  return st ? st->out.size() : 0;
}

void h2_server_session::reset(std::int32_t stream, std::uint32_t error_code) {
  auto* st = find(stream);
  if (!st) return;
  st->handler_done = true;  // closed by the handler: it is not told of it
  nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, stream, error_code);
}

void h2_server_session::consumed(std::int32_t stream, std::size_t bytes) {
  auto* st = find(stream);
  if (!st) return;
  bytes = std::min(bytes, st->unconsumed);
  st->unconsumed -= bytes;
  nghttp2_session_consume(session_, stream, bytes);
}

void h2_server_session::shut_down() {
  nghttp2_submit_shutdown_notice(session_);
  nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE,
                        nghttp2_session_get_last_proc_stream_id(session_), NGHTTP2_NO_ERROR,
                        nullptr, 0);
}

void h2_server_session::calm_down() {
  if (failure_.empty()) failure_ = "told to calm down";
  nghttp2_session_terminate_session(session_, NGHTTP2_ENHANCE_YOUR_CALM);
}

std::size_t h2_server_session::memory() const {
  return memory_->bytes() + unsent_bytes_;
}

}  // namespace broker::http
