// The client side of an HTTP/2 connection to an upstream (http/h2_client_session.hpp) on an
// upstream's bytes, split into reads at points the input chooses, with three requests open (one
// with a body still going up). The handler takes every body byte and sometimes resets a stream
// of its own. What must hold: nothing crashes or leaks (ASan), the session's memory stays
// bounded, a stream is told nothing after its reset, body bytes only after a final head, and a
// session that has failed reads nothing more.
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>

#include "fuzz_support.hpp"
#include "http/h2_client_session.hpp"

namespace {

using namespace broker;
using fuzz::check;

struct taking_handler final : http::h2_client_session::handler {
  http::h2_client_session* session = nullptr;
  std::uint64_t choices = 0;
  std::set<std::int32_t> reset_seen, final_head;

  void on_response(std::int32_t stream, http::message_head head, bool) override {
    check(reset_seen.count(stream) == 0, "a response on a stream already reset");
    check(head.headers.size() <= 200, "more fields than the limit let through");
    if (head.status >= 200) final_head.insert(stream);
    if (fuzz::next_random(choices) % 5 == 0) session->reset(stream, 8);
  }
  void on_data(std::int32_t stream, std::string_view data, bool) override {
    check(reset_seen.count(stream) == 0, "body bytes on a stream already reset");
    check(data.empty() || final_head.count(stream) == 1, "body bytes before a final head");
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
  taking_handler handler;
  handler.choices = fuzz::hash_of(input);
  http::h2_client_session::limits limits;
  limits.max_header_list_bytes = 1024;
  limits.max_header_fields = 16;
  http::h2_client_session session(handler, limits);
  handler.session = &session;
  http::message_head get;
  get.method = "GET";
  get.headers = {{"host", "api.test"}, {"te", "trailers"}};
  http::message_head post = get;
  post.method = "POST";
  post.has_body = true;
  session.request(get, "https", "", "/a", true);
  const auto up = session.request(post, "https", "", "/b", false);
  session.request(get, "https", "", "/c", true);
  session.send_data(up, std::string(70000, 'b'), false);
  while (!session.output().empty()) {
  }
  bool alive = true;
  for (std::string_view piece : fuzz::pieces_of(input, fuzz::hash_of(input))) {
    if (!alive) break;
    alive = session.receive(piece);
    if (fuzz::next_random(handler.choices) % 3 == 0) session.send_data(up, "more", false);
    while (!session.output().empty()) {
    }
    check(session.memory() < 4 * 1024 * 1024, "a connection's memory past its bound");
  }
  check(session.failure().empty() || !session.wants_read() || alive, "a failed session reads on");
  return 0;
}
