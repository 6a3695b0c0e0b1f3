// The broker's own HTTPS client for OAuth token endpoints (brokers/ hands it a credential
// family's token request as a URL and a form; brokers::token_transport): one POST per call,
// --connect-to and --upstream-ca honoured, the peer verified like any upstream, bounded by a
// deadline.
#pragma once

#include <chrono>
#include <filesystem>
#include <vector>

#include "brokers/token_broker.hpp"
#include "live/connect_to.hpp"

namespace broker::live {

brokers::token_transport make_token_transport(
    std::vector<connect_to_rule> connect_to, std::vector<std::filesystem::path> upstream_cas,
    std::chrono::seconds timeout = std::chrono::seconds(30));

}  // namespace broker::live
