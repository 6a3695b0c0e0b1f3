// A request body's search on its way up (docs/policy.md): the decoded (dechunked) pieces through
// the request's stream scrubber, or, under a Content-Encoding, through their decoding first
// (docs/security-model.md: brokers::coded_body_scan, with the proxy's limits). Shared by the
// streamed relay (request_relay) and the body read whole (whole_body_reader).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "brokers/coded_body_scan.hpp"
#include "brokers/request_broker.hpp"
#include "http/content_coding.hpp"
#include "http/message.hpp"
#include "live/refusal.hpp"

namespace broker::proxy {

// What a request body's Content-Encoding asks of the exchange (asked only when the body is
// searched, i.e. the session brokers credentials): `applied` set to the codings to search
// through, or the refusal when the body cannot be searched: a coding the broker cannot read,
// or a body a credential family reads whole for what it says (`whole`).
std::optional<live::refusal> read_body_codings(const http::message_head& head,
                                               const std::optional<brokers::whole_body_need>& whole,
                                               std::vector<http::content_coding>& applied);

// Why a body's search stops it: a value that must not leave (the index of the body pattern it
// matched), or the refusal for a coded body that cannot be searched through.
using search_stop = std::variant<std::size_t, live::refusal>;

class body_search {
 public:
  // `scan` outlives this; `applied` empty: the body is searched as it is.
  body_search(brokers::stream_scrubber& scan, const std::vector<http::content_coding>& applied);

  // The next piece (`last`: the body's end) searched; what may go on now appended to `out`, or
  // why the body stops here (none of a value's bytes was appended).
  std::optional<search_stop> feed(std::string_view piece, bool last, std::string& out);
  // Bytes taken and not yet appended to `out`.
  std::size_t held() const;

 private:
  brokers::stream_scrubber& scan_;
  std::optional<brokers::coded_body_scan> coded_;
};

// The stop as the exception a streamed relay ends with (value_in_body, body_unreadable): it
// cuts the race between the request's pump and the response.
[[noreturn]] void throw_stop(search_stop stop);

}  // namespace broker::proxy
