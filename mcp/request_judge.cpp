// judge_request (request_judge.hpp).
#include "mcp/request_judge.hpp"

#include <openssl/evp.h>

namespace broker::mcp {
namespace {

std::string sha256_hex(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(data.data(), data.size(), digest, &size, EVP_sha256(), nullptr);
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < size; ++i) {
    out.push_back(hex[digest[i] >> 4]);
    out.push_back(hex[digest[i] & 15]);
  }
  return out;
}

call_record record_of(const client_body& body) {
  call_record r;
  r.messages = body.messages.size();
  // The first call the rules look at, else the first message.
  const client_message* first = &body.messages.front();
  for (const auto& m : body.messages)
    if (m.kind != call_kind::other) {
      first = &m;
      break;
    }
  r.method = first->method;
  r.kind = first->kind;
  r.target = first->target;
  if (first->kind == call_kind::tool && !first->arguments.is_null())
    r.arguments_sha256 = sha256_hex(first->arguments.dump());
  return r;
}

// A tool call the rules allow, of a tool that changed since it was pinned: refused.
call_verdict judge_pin(const client_message& m, const scopes& rules, const server_pins* pins) {
  if (!pins || !pins->store || m.kind != call_kind::tool || rules.empty()) return {};
  const auto fields = pins->store->changed(pins->server, m.target);
  if (fields.empty()) return {};
  std::string list;
  for (const auto& f : fields) list += (list.empty() ? "" : ", ") + f;
  return {false, rules.front().rule + ".mcp.pins",
          "the tool \"" + shown_name(m.target) + "\" changed since this session first listed it (" +
              list + ")"};
}

}  // namespace

judged_request judge_request(std::string_view body, const scopes& rules, const server_pins* pins) {
  judged_request out;
  auto messages = read_client_body(body, out.unreadable);
  if (!messages) {
    out.unreadable = "an MCP request the broker cannot read: " + out.unreadable;
    return out;
  }
  out.record = record_of(*messages);
  std::vector<call_verdict> verdicts;
  for (const auto& m : messages->messages) {
    verdicts.push_back(judge_call(m, rules));
    if (verdicts.back().allowed) verdicts.back() = judge_pin(m, rules, pins);
    if (!verdicts.back().allowed && !out.refused) {
      out.refused = true;
      out.rule = verdicts.back().rule;
      out.why = verdicts.back().why;
    }
  }
  if (!out.refused) return out;
  nlohmann::json answers = nlohmann::json::array();
  for (std::size_t i = 0; i < verdicts.size(); ++i) {
    const client_message& m = messages->messages[i];
    if (!m.request()) continue;
    const bool own = !verdicts[i].allowed;
    answers.push_back(
        refusal(m.id, own ? verdicts[i].why : "refused with the batch it came in: " + out.why,
                "mcp_tool_denied", own ? verdicts[i].rule : out.rule));
  }
  if (answers.empty()) return out;
  const auto& answer = messages->batch ? answers : answers.front();
  out.answer = answer.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return out;
}

}  // namespace broker::mcp
