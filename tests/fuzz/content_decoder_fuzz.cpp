// The decoder of coded request bodies (http::content_decoder, docs/security-model.md) over
// libraries that read untrusted bytes. The first input byte picks the codings (bits 0-1: the last
// applied; bit 2: one more, applied before it, bits 3-4), the rest is the coded body. What it
// decodes to and how it ends must not depend on how the body was split into feeds, and a checkpoint
// never points past what was fed or handed out.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.hpp"
#include "http/content_decoder.hpp"

namespace {

using namespace broker;
using fuzz::check;

// No ratio limit here (how far output may run ahead of input depends on where feeds end); the
// size limit keeps a run short.
constexpr http::decode_limits limits{1024 * 1024, 1024 * 1024, std::size_t{1} << 40};
constexpr std::size_t max_bytewise = 1024;

struct decode_run {
  http::decode_status status = http::decode_status::ok;
  std::string out;
};

decode_run decode(const std::vector<http::content_coding>& applied,
                  const std::vector<std::string_view>& pieces) {
  http::content_decoder d(applied, limits);
  decode_run run;
  std::size_t fed = 0;
  const auto sink = [&run](std::string_view piece) {
    check(!piece.empty(), "an empty piece handed out");
    run.out.append(piece);
  };
  for (std::string_view piece : pieces) {
    fed += piece.size();
    run.status = d.feed(piece, sink);
    const auto settled = d.settled();
    check(settled.coded <= fed, "a checkpoint past the bytes fed");
    check(settled.decoded <= run.out.size(), "a checkpoint past the bytes handed out");
    check(d.decoded_bytes() == run.out.size(), "decoded_bytes() is not what was handed out");
    if (run.status != http::decode_status::ok) return run;
  }
  run.status = d.finish();
  check(run.out.size() <= limits.max_decoded, "handed out more than the size limit");
  return run;
}

// With one coding the outcome is the same however the body was split. In a list, which failure
// comes first may differ when both are there: an outer decoder past the size limit in a piece
// whose output an inner one finds corrupt at its start (the limit is checked on each piece
// before the next decoder reads it); whether the body fails may not.
void check_same(const decode_run& whole, const decode_run& split, bool one_coding) {
  if (one_coding)
    check(whole.status == split.status, "the outcome depends on the split");
  else
    check((whole.status == http::decode_status::ok) == (split.status == http::decode_status::ok),
          "whether a list decodes depends on the split");
  if (whole.status == http::decode_status::ok)
    check(whole.out == split.out, "the decoded bytes depend on the split");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const auto choice = data[0];
  std::vector<http::content_coding> applied;
  if (choice & 4) applied.push_back(static_cast<http::content_coding>((choice >> 3) & 3));
  applied.push_back(static_cast<http::content_coding>(choice & 3));
  const std::string_view body = fuzz::as_text(data + 1, size - 1);

  const bool one = applied.size() == 1;
  const decode_run whole = decode(applied, {body});
  check_same(whole, decode(applied, fuzz::pieces_of(body, fuzz::hash_of(body))), one);
  if (body.size() <= max_bytewise) check_same(whole, decode(applied, fuzz::bytes_of(body)), one);
  return 0;
}
