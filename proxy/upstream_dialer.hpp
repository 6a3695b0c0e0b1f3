// Resolving and dialing an upstream: --connect-to mapping, the SSRF guard on every resolved
// address, and a deadline on each step. The address that was checked is the one dialed.
#pragma once

#include <optional>
#include <string>

#include "base/asio.hpp"
#include "config/policy_set.hpp"
#include "live/live_session.hpp"
#include "live/refusal.hpp"
#include "proxy/upstream_connection.hpp"

namespace broker::proxy {

struct dial_outcome {
  std::optional<tcp::socket> socket;
  std::optional<live::refusal> refused;  // set when socket is not
  std::string address;                   // what was dialed ("127.0.0.1:8443"), for logs
  bool loopback = false;                 // the dialed address is a loopback one
};

asio::awaitable<dial_outcome> dial_upstream(const live::live_session& ctx,
                                            const config::policy_set& policy,
                                            const config::destination& dest);

struct open_outcome {
  std::unique_ptr<upstream_connection> conn;
  std::optional<live::refusal> refused;  // set when conn is not
  bool h2 = false;                       // the upstream chose HTTP/2 (ALPN)
};

// Dials `dest` and, with `tls`, completes a verified TLS handshake for dest.host (SNI, system
// roots + --upstream-ca; a failure is 502 upstream_tls_failed, never a plaintext fallback).
// `key` is what the connection is pooled under. With `offer_h2` the handshake offers h2 before
// http/1.1 (ALPN), and the outcome says which the upstream chose.
asio::awaitable<open_outcome> open_upstream(live::live_session& ctx,
                                            const config::policy_set& policy,
                                            const config::destination& dest, bool tls,
                                            std::string key, bool offer_h2 = false);

}  // namespace broker::proxy
