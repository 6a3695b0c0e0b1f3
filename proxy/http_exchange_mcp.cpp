// The MCP part of an exchange (docs/policy.md, "MCP servers"): a client's POST on a host whose
// rule says "mcp", judged whole before anything of it goes up or any credential is planned;
// a refused call answered as a JSON-RPC error, or held while a person is asked.
#include "live/ask_desk.hpp"
#include "mcp/call_rules.hpp"
#include "mcp/request_judge.hpp"
#include "proxy/http_exchange.hpp"

namespace broker::proxy {

bool http_exchange::carries_mcp_calls(const http::message_head& head) const {
  return !s_.mcp.empty() && head.has_body && head.method == "POST";
}

asio::awaitable<std::optional<next_step>> http_exchange::judge_mcp(bool keep_alive) {
  const mcp::server_pins pins{&s_.io.ctx.mcp_pins(), s_.mcp_server()};
  const mcp::judged_request judged =
      mcp::judge_request(s_.body->bytes, s_.mcp, &pins, &s_.io.ctx.mcp_approvals());
  if (!judged.unreadable.empty())
    co_return co_await refuse(live::refusal::bad_request(judged.unreadable), false);
  const auto& r = judged.record;
  auto& call = s_.entry.mcp.emplace();
  call.method = r.method;
  call.kind = mcp::kind_name(r.kind);
  call.target = r.target;
  call.arguments_sha256 = r.arguments_sha256;
  call.messages = r.messages;
  s_.mcp_call_id = r.id;
  if (!judged.refused) co_return std::nullopt;
  s_.entry.rule = judged.rule;
  // wrap --learn: a call a person could have approved goes, recorded as learned (for policy
  // suggest's "mcp" rules); never a tool that changed since its pin.
  if (judged.ask && !judged.ask->pin && s_.io.ctx.learns()) {
    s_.entry.learned = true;
    co_return std::nullopt;
  }
  std::string answer = judged.answer;
  const char* error = "mcp_tool_denied";
  if (judged.ask && s_.io.ctx.asks()) {
    const auto outcome = co_await ask_about_call(judged, pins.server);
    if (!outcome) co_return std::nullopt;  // approved: it goes up
    if (!outcome->empty()) {
      answer = *outcome;
      error = "approval_denied";
    }
  }
  s_.entry.mcp->outcome = "refused";
  if (answer.empty())
    co_return co_await refuse(live::refusal::mcp_tool_denied(judged.rule, judged.why), keep_alive);
  s_.entry.event = "refused";
  session::log(spdlog::level::debug, s_.io.tag, "MCP {} refused: {}", s_.entry.host, judged.why);
  co_return co_await send_json(answer, keep_alive, false, error);
}

asio::awaitable<std::optional<std::string>> http_exchange::ask_about_call(
    const mcp::judged_request& judged, const std::string& server) {
  const mcp::asked_call& call = *judged.ask;
  live::mcp_ask ask{
      server,     call.kind,    call.method, call.target, mcp::shown_arguments(call.arguments),
      judged.why, call.changed, call.pin,    call.shown};
  s_.io.timer.arm(timeouts().ask + std::chrono::seconds(5), live::waiting_for::approval);
  const config::destination dest{s_.entry.host, std::nullopt, s_.entry.port};
  const auto outcome = co_await s_.io.ctx.asks()->hold_call(s_.entry, dest, std::move(ask));
  using kind = live::ask_outcome::kind;
  if (outcome.what == kind::approved) {
    s_.entry.rule = outcome.rule;
    co_return std::nullopt;
  }
  if (outcome.what == kind::full) co_return std::string();  // refused as if nobody were asked
  co_return mcp::answer_as(
      judged, "approval_denied",
      outcome.what == kind::timed_out ? "no decision in time: " : "a person denied it: ");
}

}  // namespace broker::proxy
