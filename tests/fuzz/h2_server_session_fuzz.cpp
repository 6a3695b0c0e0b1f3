// The server side of an HTTP/2 connection (http/h2_server_session.hpp) on a client's bytes after
// the connection preface, split into reads at points the input chooses. A handler answers each
// request as a proxy would (a head, a body, sometimes trailers or a reset of its own) and takes
// every body byte. What must hold: nothing crashes or leaks (ASan), the session's memory stays
// bounded, a stream is told at most one reset and nothing after it, and a session that has
// failed reads nothing more.
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>

#include "fuzz_support.hpp"
#include "http/h2_server_session.hpp"

namespace {

using namespace broker;
using fuzz::check;

struct answering_handler final : http::h2_server_session::handler {
  http::h2_server_session* session = nullptr;
  std::uint64_t choices = 0;
  std::set<std::int32_t> reset_seen;

  void on_request(std::int32_t stream, http::h2_request request, bool) override {
    check(reset_seen.count(stream) == 0, "a request on a stream already reset");
    check(request.head.headers.size() <= 101, "more fields than the limit let through");
    const auto choice = fuzz::next_random(choices) % 4;
    if (choice == 3) {
      session->reset(stream, 8);
      return;
    }
    http::message_head head;
    head.status = 200;
    head.headers = {{"content-type", "text/plain"}};
    session->respond(stream, head, choice == 0);
    if (choice == 1) session->send_data(stream, request.head.target, true);
    if (choice == 2) {
      session->send_data(stream, std::string(1000, 'x'), false);
      session->send_trailers(stream, {{"grpc-status", "0"}});
    }
  }
  void on_head_too_large(std::int32_t stream) override {
    http::message_head head;
    head.status = 431;
    session->respond(stream, head, true);
  }
  void on_data(std::int32_t stream, std::string_view data, bool) override {
    check(reset_seen.count(stream) == 0, "body bytes on a stream already reset");
    if (!data.empty()) session->consumed(stream, data.size());
  }
  void on_trailers(std::int32_t stream, std::vector<http::header_field>) override {
    check(reset_seen.count(stream) == 0, "trailers on a stream already reset");
  }
  void on_reset(std::int32_t stream, std::uint32_t) override {
    check(reset_seen.insert(stream).second, "a stream reset twice");
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  static const std::string preface =
      std::string("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") + std::string("\0\0\0\x04\0\0\0\0\0", 9);
  answering_handler handler;
  handler.choices = fuzz::hash_of(input);
  http::h2_limits limits;
  limits.max_concurrent_streams = 8;  // small, so that inputs reach the limits
  limits.max_header_list_bytes = 1024;
  limits.max_header_fields = 16;
  limits.max_control_frames_per_second = 50;
  limits.max_empty_frames_per_second = 10;
  limits.max_resets_per_second = 10;
  limits.max_refused_per_second = 10;
  http::h2_server_session session(handler, limits);
  handler.session = &session;
  auto now = http::h2_server_session::clock::time_point{} + std::chrono::hours(1);
  std::uint64_t seed = fuzz::hash_of(input) ^ 0x5eed;
  bool alive = session.receive(preface, now);
  for (std::string_view piece : fuzz::pieces_of(input, fuzz::hash_of(input))) {
    if (!alive) break;
    alive = session.receive(piece, now);
    while (!session.output().empty()) {
    }
    check(session.memory() < 4 * 1024 * 1024, "a connection's memory past its bound");
    now += std::chrono::milliseconds(fuzz::next_random(seed) % 1500);
  }
  check(session.failure().empty() || !session.wants_read(), "a failed session reads on");
  return 0;
}
