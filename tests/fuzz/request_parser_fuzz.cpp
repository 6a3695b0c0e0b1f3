// The request parser (http/parser.hpp) on arbitrary bytes. The input is the wire: parsed in
// one piece, at 1-4 input-derived split points, and (when short) a byte at a time; every run
// must end alike. A head that parsed must also survive the proxy's re-serialization: the head
// serialize_request_head writes parses back to the same method, target and forwarded fields.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.hpp"
#include "http/limits.hpp"
#include "http/message.hpp"
#include "http/parser.hpp"
#include "parser_run.hpp"

namespace {

using namespace broker;
using fuzz::check;

// Byte-at-a-time runs cost a feed per byte; longer inputs get the random splits only.
constexpr std::size_t max_bytewise = 1024;

fuzz::parser_run parse(const std::vector<std::string_view>& pieces) {
  http::parser parser(http::parser::kind::request);
  fuzz::parser_run run = fuzz::run_parser(parser, pieces, /*decode=*/false);
  if (run.status == http::parse_status::message_complete) (void)parser.keep_alive();
  return run;
}

// What the proxy sends upstream for this head must read back as the same request.
void check_reserialized(const http::message_head& head) {
  // serialize_request_head writes HTTP/1.0 or 1.1; other versions are not expected back.
  if (head.version_major != 1) return;
  const std::string wire = http::serialize_request_head(head, head.target);
  http::parser reparsed(http::parser::kind::request);
  const auto r = reparsed.feed(wire);
  check(r.status == http::parse_status::head_complete ||
            r.status == http::parse_status::message_complete,
        "a serialized head does not parse");
  check(r.consumed == wire.size(), "a serialized head does not end where it should");
  const http::message_head& back = reparsed.head();
  check(back.method == head.method, "re-serialization changed the method");
  check(back.target == head.target, "re-serialization changed the target");
  std::vector<http::header_field> forwarded;
  for (const auto& h : head.headers)
    if (!http::is_hop_by_hop(h.name, head)) forwarded.push_back(h);
  check(back.headers.size() == forwarded.size(), "re-serialization changed the field count");
  for (std::size_t i = 0; i < forwarded.size(); ++i)
    check(back.headers[i].name == forwarded[i].name && back.headers[i].value == forwarded[i].value,
          "re-serialization changed a field");
  check(back.chunked == head.chunked && back.content_length == head.content_length,
        "re-serialization changed the body framing");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view wire = fuzz::as_text(data, size);
  // Past the head limit, where a feed ends decides whether the limit trips before a syntax error.
  const bool below_limit = wire.size() <= http::limits::max_head_bytes;

  const fuzz::parser_run whole = parse({wire});
  const fuzz::parser_run split = parse(fuzz::pieces_of(wire, fuzz::hash_of(wire)));
  fuzz::check_same_run(whole, split, below_limit);
  if (wire.size() <= max_bytewise) fuzz::check_same_run(whole, parse(fuzz::bytes_of(wire)), true);

  if (whole.head_done && whole.status != http::parse_status::error && below_limit)
    check_reserialized(whole.head);
  return 0;
}
