// --connect-to HOST:PORT:ADDR:PORT with curl's semantics: requests for HOST:PORT are dialed at
// ADDR:PORT instead. An empty HOST or PORT on the left matches any; an empty one on the right
// keeps the original. The operator chose these targets, so they skip the private-address guard.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace broker::live {

struct connect_to_rule {
  std::string host;                   // normalized; empty = any host
  std::optional<std::uint16_t> port;  // empty = any port
  std::string target_host;            // empty = keep the requested host
  std::optional<std::uint16_t> target_port;
};

// Throws std::invalid_argument with a message naming the value when malformed.
connect_to_rule parse_connect_to(std::string_view spec);

struct dial_target {
  std::string host;
  std::uint16_t port;
};
// The first rule that matches, applied; nullopt when none does.
std::optional<dial_target> apply_connect_to(const std::vector<connect_to_rule>& rules,
                                            std::string_view host, std::uint16_t port);

}  // namespace broker::live
