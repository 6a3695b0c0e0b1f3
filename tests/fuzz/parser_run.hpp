// Drives one http::parser over a message that arrives in pieces, the way the proxy reads one:
// bytes a feed did not consume (the rest after head_complete) are fed again, and the end of the
// input is the peer closing. Shared by the request-parser and chunked-decoder targets.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.hpp"
#include "http/message.hpp"
#include "http/parser.hpp"

namespace broker::fuzz {

struct parser_run {
  http::parse_status status = http::parse_status::need_more;
  http::parse_error error = http::parse_error::none;
  bool head_done = false;
  http::message_head head;
  std::size_t consumed = 0;  // the message's length in bytes when it completed
  std::string body;          // decoded body bytes, when decoding
};

inline parser_run run_parser(http::parser& parser, const std::vector<std::string_view>& pieces,
                             bool decode) {
  parser_run run;
  auto settled = [&run] {
    return run.status == http::parse_status::error ||
           run.status == http::parse_status::message_complete;
  };
  for (std::string_view piece : pieces) {
    while (!settled()) {
      const auto r = parser.feed(piece, decode ? &run.body : nullptr);
      check(r.consumed <= piece.size(), "feed consumed more than it was given");
      run.status = r.status;
      run.consumed += r.consumed;
      piece.remove_prefix(r.consumed);
      if (r.status == http::parse_status::need_more)
        check(piece.empty(), "need_more left bytes of the feed unconsumed");
      if (r.status != http::parse_status::head_complete || piece.empty()) break;
    }
    if (settled()) break;
  }
  if (!settled()) run.status = parser.finish().status;
  if (run.status == http::parse_status::message_complete)
    check(parser.message_done(), "message_complete without message_done()");
  run.error = parser.error();
  check((run.status == http::parse_status::error) == (run.error != http::parse_error::none),
        "error() disagrees with the status");
  if (run.status == http::parse_status::error)
    check(!parser.head_done() && !parser.message_done(), "a refused message reads as done");
  run.head_done = parser.head_done();
  run.head = parser.head();
  return run;
}

inline bool same_head(const http::message_head& a, const http::message_head& b) {
  if (a.headers.size() != b.headers.size()) return false;
  for (std::size_t i = 0; i < a.headers.size(); ++i)
    if (a.headers[i].name != b.headers[i].name || a.headers[i].value != b.headers[i].value)
      return false;
  return a.method == b.method && a.target == b.target && a.status == b.status &&
         a.reason == b.reason && a.version_major == b.version_major &&
         a.version_minor == b.version_minor && a.keep_alive == b.keep_alive &&
         a.upgrade == b.upgrade && a.has_body == b.has_body && a.chunked == b.chunked &&
         a.content_length == b.content_length;
}

// Two runs over the same bytes, split differently, must end alike: same status, same message
// length and decoded body, and (unless refused: after an error the head is not used, and how much
// of it was read depends on where the feed ended) the same head. The error kind too, while the
// input is below the head limit (past it, where a feed ends decides whether the limit or a syntax
// error trips first).
inline void check_same_run(const parser_run& a, const parser_run& b, bool compare_error_kind) {
  check(a.status == b.status, "split changed the parse status");
  if (compare_error_kind) check(a.error == b.error, "split changed the parse error");
  if (a.status != http::parse_status::error) {
    check(a.head_done == b.head_done, "split changed whether the head completed");
    if (a.head_done) check(same_head(a.head, b.head), "split changed the parsed head");
  }
  if (a.status == http::parse_status::message_complete)
    check(a.consumed == b.consumed, "split changed where the message ends");
  check(a.body == b.body, "split changed the decoded body");
}

}  // namespace broker::fuzz
