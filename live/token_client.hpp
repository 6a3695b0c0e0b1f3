// The broker's own HTTPS client for credential providers (OAuth token endpoints, GitHub's App
// API; brokers::provider_transport): one request per call on a connection of its own,
// --connect-to and --upstream-ca honoured, the peer verified like any upstream, bounded by a
// deadline.
#pragma once

#include <chrono>
#include <filesystem>
#include <vector>

#include "brokers/token_broker.hpp"
#include "live/connect_to.hpp"

namespace broker::live {

brokers::provider_transport make_provider_transport(
    std::vector<connect_to_rule> connect_to, std::vector<std::filesystem::path> upstream_cas,
    std::chrono::seconds timeout = std::chrono::seconds(30));

}  // namespace broker::live
