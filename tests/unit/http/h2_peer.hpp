// Test peers for http/h2_server_session: a real HTTP/2 client (nghttp2's own client session, in
// the same process, its bytes carried to the server and back by pump()), a handler that records
// what it is told, and hand-made frames for what a well-behaved peer never sends.
#pragma once

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "http/h2_server_session.hpp"

namespace broker::test {

using http::h2_request;
using http::h2_server_session;
using http::header_field;

struct recording_handler final : h2_server_session::handler {
  struct seen {
    std::int32_t stream;
    h2_request request;
    bool end_stream;
  };
  std::vector<seen> requests;
  std::map<std::int32_t, std::string> bodies;
  std::set<std::int32_t> ended;
  std::map<std::int32_t, std::vector<header_field>> trailers;
  std::vector<std::pair<std::int32_t, std::uint32_t>> resets;
  std::vector<std::int32_t> too_large;
  h2_server_session* session = nullptr;
  bool consume = true;  // give body bytes back as they arrive

  void on_request(std::int32_t stream, h2_request request, bool end_stream) override {
    requests.push_back({stream, std::move(request), end_stream});
    if (end_stream) ended.insert(stream);
  }
  void on_head_too_large(std::int32_t stream) override { too_large.push_back(stream); }
  void on_data(std::int32_t stream, std::string_view data, bool last) override {
    bodies[stream] += data;
    if (last) ended.insert(stream);
    if (consume && session && !data.empty()) session->consumed(stream, data.size());
  }
  void on_trailers(std::int32_t stream, std::vector<header_field> fields) override {
    trailers[stream] = std::move(fields);
    ended.insert(stream);
  }
  void on_reset(std::int32_t stream, std::uint32_t code) override {
    resets.emplace_back(stream, code);
  }
};

// nghttp2's client session: requests submitted, responses collected.
class h2_client {
 public:
  struct response {
    int status = 0;
    std::vector<header_field> fields;
    std::string body;
    std::vector<header_field> trailers;
    bool closed = false;
    std::uint32_t error = 0;
  };
  std::map<std::int32_t, response> responses;
  bool goaway = false;
  std::uint32_t goaway_error = 0;

  h2_client() {
    nghttp2_session_callbacks* cbs = nullptr;
    nghttp2_session_callbacks_new(&cbs);
    nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_close);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame);
    nghttp2_session_client_new(&session_, cbs, this);
    nghttp2_session_callbacks_del(cbs);
    nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, nullptr, 0);
  }
  ~h2_client() { nghttp2_session_del(session_); }
  h2_client(const h2_client&) = delete;
  h2_client& operator=(const h2_client&) = delete;

  // A request with these fields (after the pseudo-headers); a body when `body` is given
  // (`open`: the body does not end; more comes with more()).
  std::int32_t request(const std::string& method, const std::string& path,
                       std::vector<header_field> fields = {}, const std::string* body = nullptr,
                       bool open = false) {
    std::vector<header_field> all = {
        {":method", method}, {":scheme", "https"}, {":authority", "api.test"}, {":path", path}};
    for (auto& f : fields) all.push_back(std::move(f));
    std::vector<nghttp2_nv> nv;
    for (auto& f : all)
      nv.push_back({reinterpret_cast<uint8_t*>(f.name.data()),
                    reinterpret_cast<uint8_t*>(f.value.data()), f.name.size(), f.value.size(),
                    NGHTTP2_NV_FLAG_NONE});
    nghttp2_data_provider provider{};
    provider.read_callback = read_body;
    const auto id = nghttp2_submit_request(session_, nullptr, nv.data(), nv.size(),
                                           body ? &provider : nullptr, nullptr);
    if (id < 0) throw std::runtime_error(nghttp2_strerror(id));
    if (body) bodies_[id] = {*body, !open};
    return id;
  }
  // More body for an open request.
  void more(std::int32_t stream, const std::string& data, bool last) {
    bodies_[stream].first += data;
    bodies_[stream].second = last;
    nghttp2_session_resume_data(session_, stream);
  }
  void reset(std::int32_t stream, std::uint32_t code) {
    nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, stream, code);
  }
  void ping() { nghttp2_submit_ping(session_, NGHTTP2_FLAG_NONE, nullptr); }

  std::string output() {
    std::string out;
    for (;;) {
      const uint8_t* data = nullptr;
      const auto n = nghttp2_session_mem_send(session_, &data);
      if (n <= 0) return out;
      out.append(reinterpret_cast<const char*>(data), static_cast<std::size_t>(n));
    }
  }
  void receive(const std::string& bytes) {
    const auto n = nghttp2_session_mem_recv(
        session_, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    if (n < 0) throw std::runtime_error(std::string("client: ") + nghttp2_strerror(int(n)));
  }

 private:
  static h2_client& of(void* p) { return *static_cast<h2_client*>(p); }
  static int on_header(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name,
                       size_t namelen, const uint8_t* value, size_t valuelen, uint8_t, void* p) {
    auto& r = of(p).responses[frame->hd.stream_id];
    const std::string n(reinterpret_cast<const char*>(name), namelen);
    const std::string v(reinterpret_cast<const char*>(value), valuelen);
    if (n == ":status")
      r.status = std::stoi(v);
    else if (frame->headers.cat == NGHTTP2_HCAT_HEADERS)
      r.trailers.push_back({n, v});
    else
      r.fields.push_back({n, v});
    return 0;
  }
  static int on_data(nghttp2_session*, uint8_t, int32_t id, const uint8_t* data, size_t n,
                     void* p) {
    of(p).responses[id].body.append(reinterpret_cast<const char*>(data), n);
    return 0;
  }
  static int on_close(nghttp2_session*, int32_t id, uint32_t code, void* p) {
    auto& r = of(p).responses[id];
    r.closed = true;
    r.error = code;
    return 0;
  }
  static int on_frame(nghttp2_session*, const nghttp2_frame* frame, void* p) {
    if (frame->hd.type == NGHTTP2_GOAWAY) {
      of(p).goaway = true;
      of(p).goaway_error = frame->goaway.error_code;
    }
    return 0;
  }
  static ssize_t read_body(nghttp2_session*, int32_t id, uint8_t* buf, size_t length,
                           uint32_t* flags, nghttp2_data_source*, void* p) {
    auto& [data, last] = of(p).bodies_[id];
    const std::size_t n = std::min(length, data.size());
    std::copy_n(data.data(), n, buf);
    data.erase(0, n);
    if (data.empty() && last) *flags |= NGHTTP2_DATA_FLAG_EOF;
    if (n == 0 && !last) return NGHTTP2_ERR_DEFERRED;
    return static_cast<ssize_t>(n);
  }

  nghttp2_session* session_ = nullptr;
  std::map<std::int32_t, std::pair<std::string, bool>> bodies_;  // unsent, and whether it ends
};

// Carries bytes both ways until neither side has more to say.
inline void pump(h2_client& client, h2_server_session& server,
                 h2_server_session::clock::time_point now = h2_server_session::clock::now()) {
  for (int round = 0; round < 10000; ++round) {
    const auto up = client.output();
    if (!up.empty()) server.receive(up, now);
    const auto down = server.output();
    if (!down.empty()) client.receive(down);
    if (up.empty() && down.empty()) return;
  }
  throw std::runtime_error("pump: the peers never went quiet");
}

// Raw frames (RFC 9113 §4.1).
inline std::string frame(std::uint8_t type, std::uint8_t flags, std::uint32_t stream,
                         const std::string& payload = {}) {
  std::string f;
  const auto n = payload.size();
  f += static_cast<char>((n >> 16) & 0xff);
  f += static_cast<char>((n >> 8) & 0xff);
  f += static_cast<char>(n & 0xff);
  f += static_cast<char>(type);
  f += static_cast<char>(flags);
  for (int shift = 24; shift >= 0; shift -= 8) f += static_cast<char>((stream >> shift) & 0xff);
  return f + payload;
}

inline const std::string client_preface =
    std::string("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") + frame(NGHTTP2_SETTINGS, 0, 0);

// A request header block in HPACK with static-table entries only: GET https "/" and
// :authority api.test (a literal without indexing, its name from the static table).
inline std::string get_block() {
  return std::string("\x82\x87\x84\x01\x08", 5) + "api.test";
}

// The error code of the first frame of `type` among `bytes` (frames as a peer sends them) whose
// code is at `offset` in its payload, on `stream` unless that is -1; or -1 when none.
inline long frame_code(const std::string& bytes, std::uint8_t type, std::size_t offset,
                       long stream = -1) {
  std::size_t at = 0;
  while (at + 9 <= bytes.size()) {
    const std::size_t n = (std::size_t(std::uint8_t(bytes[at])) << 16) |
                          (std::size_t(std::uint8_t(bytes[at + 1])) << 8) |
                          std::uint8_t(bytes[at + 2]);
    long id = 0;
    for (int i = 5; i < 9; ++i) id = (id << 8) | std::uint8_t(bytes[at + i]);
    if (std::uint8_t(bytes[at + 3]) == type && (stream == -1 || id == stream) &&
        at + 9 + offset + 4 <= bytes.size()) {
      long code = 0;
      for (std::size_t i = offset; i < offset + 4; ++i)
        code = (code << 8) | std::uint8_t(bytes[at + 9 + i]);
      return code;
    }
    at += 9 + n;
  }
  return -1;
}

// The error code of the first GOAWAY among `bytes`, or -1.
inline long goaway_code(const std::string& bytes) {
  return frame_code(bytes, NGHTTP2_GOAWAY, 4);
}

// The error code of the first RST_STREAM on `stream` among `bytes`, or -1.
inline long rst_code(const std::string& bytes, std::int32_t stream) {
  return frame_code(bytes, NGHTTP2_RST_STREAM, 0, stream);
}

}  // namespace broker::test
