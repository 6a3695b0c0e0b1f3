#include "proxy/body_search.hpp"

#include "proxy/limits.hpp"
#include "proxy/relay_errors.hpp"

namespace broker::proxy {
namespace {

constexpr http::decode_limits coded_body_limits{
    limits::max_decoded_body_bytes, limits::decoding_ratio_free_bytes, limits::max_decoding_ratio};

std::optional<search_stop> stop_of(const brokers::coded_body_scan::outcome& o) {
  using verdict = brokers::coded_body_scan::verdict;
  switch (o.what) {
    case verdict::pass:
      return std::nullopt;
    case verdict::match:
      return o.pattern;
    case verdict::too_large:
      return live::refusal::body_too_large("the request body is coded, and " + o.why);
    case verdict::corrupt:
      // A coding the broker reads, with bytes that are not that coding: malformed, like a
      // broken chunked frame.
      return live::refusal::bad_request("malformed request body: " + o.why);
    case verdict::withholding:
      return live::refusal::unsupported_encoding("the request body is coded, and " + o.why);
  }
  return std::nullopt;
}

}  // namespace

std::optional<live::refusal> read_body_codings(const http::message_head& head,
                                               const std::optional<brokers::whole_body_need>& whole,
                                               std::vector<http::content_coding>& applied) {
  auto parsed = http::parse_content_codings(head.list("content-encoding"));
  if (!parsed.unsupported.empty())
    return live::refusal::unsupported_encoding(
        "the request body's Content-Encoding (" + parsed.unsupported +
        ") is not one the broker can search through (gzip, deflate, br, zstd, up to " +
        std::to_string(http::max_codings) + " in a row); send it uncoded");
  applied = std::move(parsed.applied);
  if (!applied.empty() && whole && whole->reads_content)
    return live::refusal::unsupported_encoding(
        "the broker reads this request's body (" + std::string(whole->why) +
        ") and does not undo a Content-Encoding for that; send it uncoded");
  return std::nullopt;
}

body_search::body_search(brokers::stream_scrubber& scan,
                         const std::vector<http::content_coding>& applied)
    : scan_(scan) {
  if (!applied.empty())
    coded_.emplace(applied, coded_body_limits, limits::max_withheld_coded_bytes, scan);
}

std::optional<search_stop> body_search::feed(std::string_view piece, bool last, std::string& out) {
  if (coded_) {
    if (auto stop = stop_of(coded_->feed(piece, out))) return stop;
    if (last) return stop_of(coded_->finish(out));
    return std::nullopt;
  }
  if (auto match = scan_.feed(piece, out)) return *match;
  if (last)
    if (auto match = scan_.finish(out)) return *match;
  return std::nullopt;
}

void throw_stop(search_stop stop) {
  if (auto* pattern = std::get_if<std::size_t>(&stop)) throw value_in_body(*pattern);
  throw body_unreadable(std::get<live::refusal>(std::move(stop)));
}

std::size_t body_search::held() const {
  return coded_ ? coded_->withheld() : scan_.held();
}

}  // namespace broker::proxy
