// After an intercepted CONNECT (DESIGN §1): the client is told the tunnel is open, and what it
// sends next is served by the proxy itself: a TLS handshake gets a leaf for the CONNECT host
// (ALPN h2 or http/1.1, DESIGN §14), plain HTTP is read as such, and each request inside goes
// the way of a plain one, pinned to the CONNECT target (on h2, h2_connection serves the streams).
#include <openssl/ssl.h>
#include <spdlog/spdlog.h>

#include "certs/tls_contexts.hpp"
#include "config/host_pattern.hpp"
#include "config/request_target.hpp"
#include "proxy/client_connection.hpp"
#include "proxy/idle_read.hpp"
#include "session/log.hpp"

namespace broker::proxy {

using namespace asio::experimental::awaitable_operators;

namespace {

// The first byte of a TLS record carrying a handshake message (RFC 8446 §5.1).
constexpr char tls_handshake_record = 0x16;

bool sni_matches(SSL* ssl, const config::destination& dest) {
  const char* name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
  if (!name) return true;  // absent SNI (IP literal targets, some clients) is allowed
  if (dest.ip) return false;
  const auto normalized = config::normalize_host(name);
  return normalized && *normalized == dest.host;
}

}  // namespace

asio::awaitable<bool> client_connection::start_interception(const config::destination& dest,
                                                            std::optional<live::refusal> refused,
                                                            bool http2) {
  if (!captured_) co_await write_all(client_, "HTTP/1.1 200 Connection Established\r\n\r\n");
  intercept_.emplace(interception{dest, "http", std::move(refused)});

  // What comes next decides between TLS and plain HTTP; it may already be buffered.
  deadline_.arm(timeouts().head, live::waiting_for::client_head);
  if (in_.empty()) {
    auto [ec, n] = co_await read_idle(client_, in_);
    if (ec) co_return false;
  }
  if (in_.view().front() != tls_handshake_record) co_return true;

  auto& tls = ctx_->tls();
  client_.start_tls(tls.server());
  SSL* ssl = client_.native_tls();
  tls.use_leaf(ssl, dest.host);
  if (http2) tls.offer_h2(ssl);
  deadline_.arm(timeouts().tls, live::waiting_for::client_head);
  // The bytes already read are the start of the ClientHello.
  const std::string early(in_.view());
  in_.consume(in_.size());
  const auto ec = co_await client_.tls().handshake_server(early);
  if (ec) {
    // Typically a client that does not trust the session CA; it says so on its side.
    session::log(spdlog::level::info, tag_, "TLS handshake for {} failed: {}",
                 ctx_->scrub(dest.host), ec.message());
    co_return false;
  }
  intercept_->scheme = "https";
  intercept_->h2 = tls.chose_h2(ssl);
  if (!intercept_->refused && !sni_matches(ssl, dest))
    intercept_->refused =
        live::refusal::host_mismatch("the TLS server name (SNI) is not the CONNECT host");
  co_return true;
}

asio::awaitable<void> client_connection::serve_h2() {
  h2_connection h2({client_, deadline_, ctx_, pool_, tag_, intercept_->dest, intercept_->refused,
                    captured_, holders_});
  h2_ = &h2;
  try {
    co_await h2.run();
  } catch (...) {
    h2_ = nullptr;
    throw;
  }
  h2_ = nullptr;
}

asio::awaitable<next_step> client_connection::handle_intercepted(http::parser& request) {
  const http::message_head& head = request.head();
  const auto& dest = intercept_->dest;
  auto& ex = begin_exchange(head.method);
  auto& entry = ex.entry();
  entry.scheme = intercept_->scheme;
  entry.host = dest.host;
  entry.port = dest.port;
  entry.target = head.target;
  request_target to{dest, intercept_->scheme, head.target,
                    request.keep_alive() && !head.has_body && !draining_};

  if (intercept_->refused)
    co_return co_await ex.refuse(*intercept_->refused, to.keep_after_refusal);
  if (head.method == "CONNECT")
    co_return co_await ex.refuse(live::refusal::bad_request("CONNECT inside a CONNECT tunnel"),
                                 false);
  if (head.target.empty() || head.target.front() != '/') {
    // Absolute-form is allowed too (RFC 9112 §3.2.2) when it names the CONNECT target.
    auto uri = config::parse_absolute_uri(head.target);
    if (!uri || uri->where.dest.host != dest.host || uri->where.dest.port != dest.port ||
        uri->scheme != intercept_->scheme) {
      if (head.method == "OPTIONS" && head.target == "*") {
        to.path_and_query = "*";
      } else {
        co_return co_await ex.refuse(
            live::refusal::host_mismatch("the request target does not name the CONNECT host"),
            to.keep_after_refusal);
      }
    } else {
      to.path_and_query = uri->path_and_query;
      entry.target = uri->path_and_query;
    }
  }
  const std::string* host_header = head.find("host");
  const std::uint16_t default_port = intercept_->scheme == "https" ? 443 : 80;
  config::authority where{dest, true};
  if (!host_header || !config::host_header_matches(*host_header, where, default_port))
    co_return co_await ex.refuse(
        live::refusal::host_mismatch(host_header ? "the Host header is not the CONNECT host"
                                                 : "the request has no Host header"),
        to.keep_after_refusal);
  co_return co_await ex.forward(request.head(), to);
}

}  // namespace broker::proxy
