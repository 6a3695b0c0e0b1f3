#include "proxy/upstream_dialer.hpp"

#include <boost/asio/connect.hpp>

#include <vector>

#include "certs/tls_contexts.hpp"
#include "config/request_target.hpp"
#include "proxy/address_guard.hpp"

namespace broker::proxy {

using namespace asio::experimental::awaitable_operators;

namespace {

config::ip_address to_config(const asio::ip::address& a) {
  config::ip_address out;
  if (a.is_v4()) {
    out.v4 = true;
    const auto b = a.to_v4().to_bytes();
    std::copy(b.begin(), b.end(), out.bytes.begin());
  } else {
    out.v4 = false;
    const auto b = a.to_v6().to_bytes();
    std::copy(b.begin(), b.end(), out.bytes.begin());
  }
  return out;
}

asio::awaitable<void> sleep_for(std::chrono::steady_clock::duration d) {
  asio::steady_timer t(co_await asio::this_coro::executor, d);
  co_await t.async_wait(use_tuple);
}

struct resolved {
  std::vector<tcp::endpoint> endpoints;
  std::optional<live::refusal> refused;
};

asio::awaitable<resolved> resolve(const std::string& host, std::uint16_t port,
                                  std::chrono::steady_clock::duration timeout) {
  tcp::resolver resolver(co_await asio::this_coro::executor);
  auto result = co_await (resolver.async_resolve(host, std::to_string(port), use_tuple) ||
                          sleep_for(timeout));
  if (result.index() == 1) co_return resolved{{}, live::refusal::dns_failed(host, "timed out")};
  auto [ec, results] = std::get<0>(std::move(result));
  if (ec) co_return resolved{{}, live::refusal::dns_failed(host, ec.message())};
  resolved out;
  for (const auto& entry : results) out.endpoints.push_back(entry.endpoint());
  if (out.endpoints.empty()) out.refused = live::refusal::dns_failed(host, "no addresses");
  co_return out;
}

// Drops the addresses policy denies or the SSRF guard refuses. The refusal for the first
// dropped address is kept to explain an empty result.
std::optional<live::refusal> screen(std::vector<tcp::endpoint>& endpoints,
                                    const config::policy_set& policy,
                                    const config::destination& dest) {
  std::optional<live::refusal> first;
  std::vector<tcp::endpoint> kept;
  for (const auto& ep : endpoints) {
    const auto address = to_config(ep.address());
    const auto verdict = policy.check_address(address, dest.port);
    if (verdict.denied) {
      if (!first) first = live::refusal::policy_denied(verdict.rule, dest.host);
      continue;
    }
    const auto cls = classify(address);
    if (cls != address_class::global && !verdict.private_ok) {
      if (!first)
        first = live::refusal::private_address(dest.host, address.to_string(), to_string(cls));
      continue;
    }
    kept.push_back(ep);
  }
  endpoints = std::move(kept);
  return first;
}

}  // namespace

asio::awaitable<dial_outcome> dial_upstream(const live::live_session& ctx,
                                            const config::policy_set& policy,
                                            const config::destination& dest) {
  dial_outcome out;
  std::vector<tcp::endpoint> endpoints;
  if (auto mapped = live::apply_connect_to(ctx.options().connect_to, dest.host, dest.port)) {
    // The operator's choice: dialed as given, exempt from the guard (docs/cli.md).
    if (auto ip = config::ip_address::parse(mapped->host)) {
      endpoints.emplace_back(asio::ip::make_address(ip->to_string()), mapped->port);
    } else {
      auto r = co_await resolve(mapped->host, mapped->port, ctx.options().timeouts.dns);
      if (r.refused) {
        out.refused = std::move(r.refused);
        co_return out;
      }
      endpoints = std::move(r.endpoints);
    }
  } else {
    if (dest.ip) {
      endpoints.emplace_back(asio::ip::make_address(dest.ip->to_string()), dest.port);
    } else {
      auto r = co_await resolve(dest.host, dest.port, ctx.options().timeouts.dns);
      if (r.refused) {
        out.refused = std::move(r.refused);
        co_return out;
      }
      endpoints = std::move(r.endpoints);
    }
    auto why = screen(endpoints, policy, dest);
    if (endpoints.empty()) {
      out.refused = std::move(why);
      co_return out;
    }
  }

  tcp::socket socket(co_await asio::this_coro::executor);
  auto result = co_await (asio::async_connect(socket, endpoints, use_tuple) ||
                          sleep_for(ctx.options().timeouts.connect));
  if (result.index() == 1) {
    out.refused = live::refusal::upstream_timeout(to_string(dest));
    co_return out;
  }
  auto [ec, endpoint] = std::get<0>(result);
  if (ec) {
    out.refused = live::refusal::upstream_unreachable(to_string(dest), ec.message());
    co_return out;
  }
  socket.set_option(tcp::no_delay(true));
  out.loopback = classify(to_config(endpoint.address())) == address_class::loopback;
  out.address = endpoint.address().is_v6()
                    ? "[" + endpoint.address().to_string() + "]:" + std::to_string(endpoint.port())
                    : endpoint.address().to_string() + ":" + std::to_string(endpoint.port());
  out.socket.emplace(std::move(socket));
  co_return out;
}

asio::awaitable<open_outcome> open_upstream(live::live_session& ctx,
                                            const config::policy_set& policy,
                                            const config::destination& dest, bool tls,
                                            std::string key, bool offer_h2) {
  open_outcome out;
  auto dialed = co_await dial_upstream(ctx, policy, dest);
  if (dialed.refused) {
    out.refused = std::move(dialed.refused);
    co_return out;
  }
  stream s(std::move(*dialed.socket));
  if (tls) {
    s.start_tls(ctx.tls().client());
    SSL* ssl = s.native_tls();
    if (!certs::tls_contexts::expect_peer(ssl, dest.host, dest.ip.has_value())) {
      out.refused = live::refusal::upstream_tls_failed(to_string(dest), "cannot set up TLS");
      co_return out;
    }
    if (offer_h2) {
      static constexpr unsigned char h2_then_http11[] = "\x02h2\x08http/1.1";
      SSL_set_alpn_protos(ssl, h2_then_http11, sizeof h2_then_http11 - 1);
    }
    auto result = co_await (s.tls().handshake_client() || sleep_for(ctx.options().timeouts.tls));
    if (result.index() == 1) {
      out.refused = live::refusal::upstream_timeout(to_string(dest));
      co_return out;
    }
    const auto ec = std::get<0>(result);
    if (ec) {
      out.refused = live::refusal::upstream_tls_failed(to_string(dest),
                                                       certs::tls_failure(ssl, ec.message()));
      co_return out;
    }
  }
  if (tls && offer_h2) {
    const unsigned char* chosen = nullptr;
    unsigned int length = 0;
    SSL_get0_alpn_selected(s.native_tls(), &chosen, &length);
    out.h2 = length == 2 && chosen[0] == 'h' && chosen[1] == '2';
  }
  out.conn = std::make_unique<upstream_connection>(std::move(s), std::move(key), dialed.loopback);
  co_return out;
}

}  // namespace broker::proxy
