// Resolving and dialing an upstream: --connect-to mapping, the SSRF guard on every resolved
// address, and a deadline on each step. The address that was checked is the one dialed.
#pragma once

#include <optional>
#include <string>

#include "config/policy_set.hpp"
#include "proxy/asio.hpp"
#include "proxy/proxy_context.hpp"
#include "proxy/refusal.hpp"

namespace broker::proxy {

struct dial_outcome {
  std::optional<tcp::socket> socket;
  std::optional<refusal> refused;  // set when socket is not
  std::string address;             // what was dialed ("127.0.0.1:8443"), for logs
};

asio::awaitable<dial_outcome> dial_upstream(const proxy_context& ctx,
                                            const config::policy_set& policy,
                                            const config::destination& dest);

}  // namespace broker::proxy
