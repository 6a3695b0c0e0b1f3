// The MCP reader (mcp/): a client's JSON-RPC body judged by tool rules, and a server's event
// stream filtered. Input: the bytes, read both as a body and as a stream.
// It never crashes or hangs, and:
//  - a body it reads with a tools/call of a tool the rules deny is refused, with a JSON answer;
//  - a stream gives the same output however it is cut, and no tools/list result in that
//    output lists a tool the rules deny (a denied tool never reaches the model).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "config/policy.hpp"
#include "fuzz_support.hpp"
#include "mcp/answer_filter.hpp"
#include "mcp/request_judge.hpp"

namespace {

using namespace broker;
using fuzz::check;

const config::policy& layer() {
  static const config::policy p = config::parse_policy(
      R"({"allow": [{"host": "m.example", "mcp": {"tools": {"allow": ["get_*", "list"],
          "deny": ["get_secret*"], "arguments": {"get_*": {"/owner": "acme"}}}}}]})",
      "fuzz.json");
  return p;
}

std::string filtered(const std::vector<std::string_view>& pieces, const mcp::scopes& rules,
                     bool& refused) {
  mcp::sse_filter f(rules);
  std::string out;
  try {
    for (auto piece : pieces) f.feed(piece, out);
    f.finish(out);
  } catch (const mcp::unreadable_answer&) {
    refused = true;
  }
  return out;
}

// Every event's data in `out` that is a tools/list result lists only allowed tools.
void check_listed(const std::string& out, const mcp::scopes& rules) {
  mcp::sse_filter again(rules);
  std::string twice;
  again.feed(out, twice);
  again.finish(twice);
  check(again.removed() == 0, "a filtered stream has nothing left to filter");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const mcp::scopes rules{{&*layer().allow.at(0).mcp, "allow[0]"}};

  const auto judged = mcp::judge_request(input, rules);
  std::string why;
  const auto body = mcp::read_client_body(input, why);
  check(body.has_value() == judged.unreadable.empty(), "the judge reads what the reader reads");
  if (body) {
    bool denied = false;
    for (const auto& m : body->messages)
      if (m.kind == mcp::call_kind::tool && m.unreadable.empty() &&
          !mcp::tool_listed(m.target, rules))
        denied = true;
    check(!denied || judged.refused, "a denied tool's call is refused");
    if (judged.refused && !judged.answer.empty())
      check(nlohmann::json::accept(judged.answer), "a refusal's answer is JSON");
  }

  bool refused_whole = false, refused_cut = false, refused_bytes = false;
  const std::string whole = filtered({input}, rules, refused_whole);
  const std::string cut =
      filtered(fuzz::pieces_of(input, fuzz::hash_of(input)), rules, refused_cut);
  check(refused_whole == refused_cut, "a stream is refused however it is cut");
  if (!refused_whole) {
    check(whole == cut, "a stream filters the same however it is cut");
    if (size < 4096) {
      const std::string bytes = filtered(fuzz::bytes_of(input), rules, refused_bytes);
      check(bytes == whole, "a stream fed a byte at a time filters the same");
    }
    check_listed(whole, rules);
  }
  return 0;
}
