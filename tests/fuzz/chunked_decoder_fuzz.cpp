// The parser's chunked-body decoding (feed(data, &body)). The input is the body after a fixed
// chunked head, once as a request's and once as a response's; the decoded bytes, where the
// message ends and how it ends must not depend on how the body was split into feeds.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.hpp"
#include "http/parser.hpp"
#include "parser_run.hpp"

namespace {

using namespace broker;
using fuzz::check;

constexpr std::string_view request_head =
    "POST http://upload.test/v1/objects HTTP/1.1\r\nHost: upload.test\r\n"
    "Transfer-Encoding: chunked\r\n\r\n";
constexpr std::string_view response_head =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";

constexpr std::size_t max_bytewise = 1024;

// The head goes in its own feed, as the proxy's head read leaves it; the body follows in pieces.
fuzz::parser_run decode(http::parser::kind kind, std::string_view head,
                        const std::vector<std::string_view>& body_pieces) {
  http::parser parser(kind);
  std::vector<std::string_view> pieces{head};
  pieces.insert(pieces.end(), body_pieces.begin(), body_pieces.end());
  fuzz::parser_run run = fuzz::run_parser(parser, pieces, /*decode=*/true);
  // Not head_done(): a refused body clears it, while head() keeps the fields as parsed.
  check(run.head.chunked, "the fixed chunked head did not parse");
  if (run.status == http::parse_status::message_complete)
    check(run.body.size() < run.consumed - head.size(),
          "decoded as many bytes as the chunked body held, framing included");
  return run;
}

void check_kind(http::parser::kind kind, std::string_view head, std::string_view body) {
  const fuzz::parser_run whole = decode(kind, head, {body});
  const std::uint64_t seed = fuzz::hash_of(body) + static_cast<std::uint64_t>(kind);
  fuzz::check_same_run(whole, decode(kind, head, fuzz::pieces_of(body, seed)), true);
  if (body.size() <= max_bytewise)
    fuzz::check_same_run(whole, decode(kind, head, fuzz::bytes_of(body)), true);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view body = fuzz::as_text(data, size);
  check_kind(http::parser::kind::request, request_head, body);
  check_kind(http::parser::kind::response, response_head, body);
  return 0;
}
