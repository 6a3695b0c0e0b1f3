// judge_request (request_judge.hpp).
#include "mcp/request_judge.hpp"
#include "base/digest.hpp"

namespace broker::mcp {
namespace {

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
    r.arguments_sha256 = base::sha256_hex(first->arguments.dump());
  if (!body.batch && first->request())
    r.id = first->id.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return r;
}

// A tool call the rules allow, of a tool that changed since it was pinned: refused.
call_verdict judge_pin(const client_message& m, const scopes& rules, const server_pins* pins,
                       std::vector<std::string>& fields_out) {
  if (!pins || !pins->store || m.kind != call_kind::tool || rules.empty()) return {};
  auto fields = pins->store->changed(pins->server, m.target);
  // The team's pins file, when a scope ships one: a tool it lacks, even if never listed.
  const config::mcp_pins_file* file = nullptr;
  for (const auto& scope : rules)
    if (scope.rules->pins) {
      file = &*scope.rules->pins;
      break;
    }
  if (file && fields.empty() && !pins->store->known(pins->server, m.target) &&
      !file->tools.contains(m.target))
    fields = {std::string(pin_store::not_pinned)};
  if (fields.empty()) return {};
  fields_out = fields;
  const std::string name = "the tool \"" + shown_name(m.target) + "\"";
  std::string why;
  if (fields.front() == pin_store::not_pinned) {
    why = name + " is not in the pins file " + file->path;
  } else {
    std::string list;
    for (const auto& f : fields) list += (list.empty() ? "" : ", ") + f;
    why = name +
          (file ? " differs from its pin in " + file->path + " ("
                : " changed since this session first listed it (") +
          list + ")";
  }
  return {false, rules.front().rule + ".mcp.pins", why, asks_on_change(rules)};
}

}  // namespace

judged_request judge_request(std::string_view body, const scopes& rules, const server_pins* pins,
                             const call_approvals* approved) {
  judged_request out;
  auto messages = read_client_body(body, out.unreadable);
  if (!messages) {
    out.unreadable = "an MCP request the broker cannot read: " + out.unreadable;
    return out;
  }
  out.record = record_of(*messages);
  std::vector<call_verdict> verdicts;
  std::vector<std::vector<std::string>> pin_fields;  // per message: a pin's refusal's fields
  std::size_t refused = 0;
  for (const auto& m : messages->messages) {
    const bool ok = approved && pins && m.kind != call_kind::other &&
                    approved->approved(pins->server, m.kind, m.target);
    verdicts.push_back(judge_call(m, rules, ok));
    pin_fields.emplace_back();
    if (verdicts.back().allowed) verdicts.back() = judge_pin(m, rules, pins, pin_fields.back());
    if (verdicts.back().allowed) continue;
    ++refused;
    if (!out.refused) {
      out.refused = true;
      out.rule = verdicts.back().rule;
      out.why = verdicts.back().why;
    }
  }
  if (!out.refused) return out;
  // One call, refused as a person may approve: asked about (the exchange holds it).
  if (refused == 1 && !messages->batch && messages->messages[0].request() && verdicts[0].askable) {
    const client_message& m = messages->messages[0];
    auto& ask = out.ask.emplace();
    ask.kind = m.kind;
    ask.method = m.method;
    ask.target = m.target;
    ask.arguments = m.arguments;
    ask.pin = !pin_fields[0].empty();
    if (ask.pin) {
      ask.changed = pin_fields[0];
      ask.shown = pins->store->latest(pins->server, m.target);
    }
  }
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

std::string answer_as(const judged_request& judged, const std::string& error,
                      const std::string& prefix) {
  auto answer = nlohmann::json::parse(judged.answer, nullptr, false);
  const auto mark = [&](nlohmann::json& one) {
    if (!one.is_object() || !one.contains("error")) return;
    auto& e = one["error"];
    e["message"] = prefix + e.value("message", "");
    e["data"]["error"] = error;
  };
  if (answer.is_array())
    for (auto& one : answer) mark(one);
  else
    mark(answer);
  return answer.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace broker::mcp
