// One request on its way upstream, whether it came as absolute-form http:// or inside an
// intercepted CONNECT: policy on method and path, the credential brokers (DESIGN §5), an upstream
// connection from the pool (or a new one), and the exchange (message_relay.cpp).
#include <spdlog/spdlog.h>

#include <algorithm>

#include "brokers/scrubber.hpp"
#include "proxy/address_guard.hpp"
#include "proxy/client_connection.hpp"
#include "proxy/limits.hpp"
#include "proxy/target.hpp"
#include "proxy/upstream_dialer.hpp"
#include "session/llm_usage.hpp"

namespace broker::proxy {

namespace {

// Decided before anything is dialed, so a refused credential never costs a connection: an
// IP literal, "localhost", or a --connect-to mapping onto a loopback address.
bool loopback_destination(const proxy_context& ctx, const config::destination& dest) {
  auto is_loopback = [](std::string_view host) {
    if (host == "localhost") return true;
    auto ip = config::ip_address::parse(host);
    return ip && classify(*ip) == address_class::loopback;
  };
  if (auto mapped = apply_connect_to(ctx.options().connect_to, dest.host, dest.port))
    return is_loopback(mapped->host);
  return is_loopback(dest.host);
}

void insert_before_blank_line(std::string& head, std::string_view lines) {
  head.insert(head.size() - 2, lines);
}

std::size_t count_headers(const http::message_head& head, std::string_view name) {
  return static_cast<std::size_t>(
      std::count_if(head.headers.begin(), head.headers.end(),
                    [name](const http::header_field& h) { return http::iequals(h.name, name); }));
}

// Why a request head cannot go through as it is, if it cannot.
std::optional<std::string> malformed_for_proxying(const http::message_head& head, bool websocket) {
  // Two Hosts let the upstream (or a front end before it) pick another virtual host than the
  // one checked here (RFC 9112 §3.2: a 400).
  if (count_headers(head, "host") > 1) return "more than one Host header";
  // An HTTP/1.0 hop cannot carry chunked coding; an upstream could read the body as a second,
  // unchecked request (RFC 9112 §6.1).
  if (head.chunked && head.version_major == 1 && head.version_minor == 0)
    return "Transfer-Encoding in an HTTP/1.0 request";
  // After a 101 the connection carries frames; a request body would be read by both.
  if (websocket && head.has_body) return "a WebSocket upgrade request with a body";
  return std::nullopt;
}

// The values of a head's header fields, to see afterwards which ones the brokers rewrote.
std::vector<std::string> header_values(const http::message_head& head) {
  std::vector<std::string> out;
  out.reserve(head.headers.size());
  for (const auto& h : head.headers) out.push_back(h.value);
  return out;
}

// A compressed response could carry a real value past the scrubber; ask for none (an absent
// Accept-Encoding would allow any coding, RFC 9110 §12.5.3).
void ask_for_identity(http::message_head& head) {
  std::erase_if(head.headers, [](const http::header_field& h) {
    return http::iequals(h.name, "accept-encoding");
  });
  head.headers.push_back({"Accept-Encoding", "identity"});
}

// The head as it goes upstream, to `target` (the brokers may have rewritten it).
std::string upstream_head(const http::message_head& head, std::string_view target,
                          const config::destination& dest, bool https, bool websocket) {
  std::string out = http::serialize_request_head(head, target);
  if (!head.find("host")) {
    // HTTP/1.0 clients may omit Host; the upstream needs it (RFC 9112 §3.2).
    const auto line_end = out.find("\r\n") + 2;
    const bool default_port = dest.port == (https ? 443 : 80);
    out.insert(line_end,
               "Host: " +
                   (default_port ? (dest.ip && !dest.ip->v4 ? "[" + dest.host + "]" : dest.host)
                                 : to_string(dest)) +
                   "\r\n");
  }
  // Connection and Upgrade are hop-by-hop; a WebSocket handshake needs them on this hop too.
  if (websocket) insert_before_blank_line(out, "Connection: Upgrade\r\nUpgrade: websocket\r\n");
  return out;
}

}  // namespace

std::optional<refusal> client_connection::admit(const config::policy_set& policy,
                                                const http::message_head& head,
                                                const request_target& to) {
  auto& entry = exchange_.entry;
  const auto verdict = policy.check_request(to.dest, head.method, to.path_and_query);
  entry.rule = verdict.rule;
  if (verdict.ambiguous_path) return refusal::bad_request(*verdict.ambiguous_path);
  if (!verdict.allowed) return refusal::policy_denied(verdict.rule, entry.host);
  return admit_by_budget(to.dest.host);
}

void client_connection::prepare_response_scrub(const std::vector<std::string>& before,
                                               const http::message_head& head) {
  for (std::size_t i = 0; i < before.size(); ++i) {
    // Dummies have their real value's length, so a rewritten value keeps its length too.
    const auto& value = head.headers[i].value;
    if (value != before[i] && value.size() == before[i].size())
      exchange_.swapped.emplace_back(brokers::secret(std::string(value)), before[i]);
  }
  scrub_patterns_ = ctx_->credentials().response_patterns();
  for (const auto& [sent, original] : exchange_.swapped)
    scrub_patterns_.push_back({sent.expose(), original});
}

asio::awaitable<bool> client_connection::handle_forward(http::parser& request) {
  const http::message_head& head = request.head();
  begin_exchange(head.method);
  auto& entry = exchange_.entry;
  entry.target = head.target;
  // A refused request's body is not read, so the connection can only go on without one.
  const bool keep_after_refusal = request.keep_alive() && !head.has_body && !draining_;

  auto uri = parse_absolute_uri(head.target);
  if (!uri) {
    const bool origin_form = !head.target.empty() && head.target.front() == '/';
    entry.target.clear();
    co_return co_await refuse(
        refusal::bad_request(origin_form ? "this is a proxy: send an absolute-form URI "
                                           "(http://host/path) or use CONNECT"
                                         : "malformed request target"),
        keep_after_refusal);
  }
  entry.scheme = uri->scheme;
  entry.host = uri->where.dest.host;
  entry.port = uri->where.dest.port;
  entry.target = uri->path_and_query;
  if (uri->scheme != "http")
    co_return co_await refuse(
        refusal::bad_request("only http:// URIs are forwarded; https:// goes through CONNECT"),
        keep_after_refusal);
  const std::string* host_header = head.find("host");
  if (host_header && !host_header_matches(*host_header, uri->where, 80))
    co_return co_await refuse(
        refusal::host_mismatch("the Host header does not match the request URI's authority"),
        keep_after_refusal);
  // Named, not a temporary in the co_await: GCC 12 destroys such temporaries twice.
  const request_target to{uri->where.dest, "http", uri->path_and_query, keep_after_refusal};
  co_return co_await forward_request(request, to);
}

asio::awaitable<bool> client_connection::forward_request(http::parser& request,
                                                         const request_target& to) {
  http::message_head& head = request.head();
  auto& entry = exchange_.entry;
  const auto& dest = to.dest;
  if (!ctx_->audit_ok())
    co_return co_await refuse(refusal::audit_unavailable(), to.keep_after_refusal);
  exchange_.websocket =
      head.has_token("connection", "upgrade") && head.has_token("upgrade", "websocket");
  if (auto why = malformed_for_proxying(head, exchange_.websocket))
    co_return co_await refuse(refusal::bad_request(*why), false);

  const auto policy = ctx_->policy();
  if (auto refused = admit(*policy, head, to))
    co_return co_await refuse(*refused, to.keep_after_refusal);
  exchange_.llm = session::classify_llm_request(dest.host, head.method, to.path_and_query);

  // The brokers: refuse what must not leave, swap what may (DESIGN §5).
  const auto& credentials = ctx_->credentials();
  std::string target = to.path_and_query;
  // Once swapped, the head and target hold real values: they are wiped however this exchange
  // ends (a client reset, a cancelled coroutine), not only when it ends well.
  bool holds_real = false;
  const brokers::wipe_on_exit wipe_swapped([&] {
    if (!holds_real) return;
    for (auto& h : head.headers) brokers::wipe(h.value);
    brokers::wipe(target);
  });
  const brokers::request_context where{dest.host, to.scheme == "http",
                                       loopback_destination(*ctx_, dest)};
  // Only a session with credentials can rewrite values; the others skip the copy.
  const auto before = credentials.empty() ? std::vector<std::string>() : header_values(head);
  auto& plan = exchange_.plan.emplace(
      credentials.plan(where, head.method, target, head.headers, head.has_body));
  holds_real = plan.holds_real();
  entry.credential = plan.credential();
  if (plan.decision().refused())
    co_return co_await refuse(refusal::of(plan.decision(), entry.host, where.plaintext),
                              to.keep_after_refusal);
  if (const auto& need = plan.whole_body()) {
    if (auto refused = co_await read_whole_body(request, where, *need))
      co_return co_await refuse(*refused, false);
  }
  const std::string_view whole = exchange_.body ? exchange_.body->bytes : std::string_view();
  const auto completed = plan.complete(head.method, target, head.headers, whole);
  entry.credential = plan.credential();
  if (completed.refused())
    co_return co_await refuse(refusal::of(completed, entry.host, where.plaintext),
                              to.keep_after_refusal && !exchange_.body);
  if (const auto& answer = plan.answer())
    co_return co_await answer_locally(answer->credential, answer->json,
                                      request.keep_alive() && !draining_);
  prepare_response_scrub(before, head);
  if (!credentials.empty()) ask_for_identity(head);

  const std::string key = to.scheme + "://" + to_string(dest);
  upstream_ = pool_.take(key);
  if (!upstream_) {
    arm_for_dial();
    auto opened = co_await open_upstream(*ctx_, *policy, dest, to.scheme == "https", key);
    if (opened.refused) co_return co_await refuse(*opened.refused, to.keep_after_refusal);
    upstream_ = std::move(opened.conn);
  }

  std::string out = upstream_head(head, target, dest, to.scheme == "https", exchange_.websocket);
  co_return co_await exchange_with_upstream(request, std::move(out), where);
}

asio::awaitable<bool> client_connection::answer_locally(const std::string& credential,
                                                        const std::string& json, bool keep_alive) {
  auto& entry = exchange_.entry;
  entry.credential = credential;
  std::string response =
      "HTTP/1.1 200 OK\r\nContent-Type: application/json; charset=utf-8\r\n"
      "Cache-Control: no-store\r\nContent-Length: " +
      std::to_string(json.size()) + "\r\n" + (keep_alive ? "" : "Connection: close\r\n") + "\r\n" +
      json;
  entry.bytes_in += response.size();
  finish_exchange(200, true);
  co_await write_client(response);
  co_return keep_alive;
}

}  // namespace broker::proxy
