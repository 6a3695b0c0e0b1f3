// `~/.config/broker/approved.json` (docs/policy.md): what `broker approve --always` approved, a
// layer of allow rules only, whose rules extend every asking layer of later sessions
// (add_approved_rules). Edited by hand as well; hidden from wrapped commands with the rest of
// ~/.config/broker.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "config/policy.hpp"

namespace broker::config {

// $HOME/.config/broker/approved.json; empty when HOME is not an absolute path.
std::filesystem::path default_approved_path();

// The file's rules; nullopt when there is no file. Throws policy_error (file, line, key) for a
// malformed file or one that holds more than "allow" rules.
std::optional<policy> load_approved(const std::filesystem::path& file);

// What one approval allows: a host name on one port, every method, every path or only those
// under `path_prefix` ("/docs" is "/docs" and "/docs/*"; "/docs/" is "/docs/*").
struct approval_rule {
  std::string host;
  std::uint16_t port = 443;
  std::string path_prefix;
  bool tunnel = false;  // a CONNECT every allowing layer tunnels (verdict::askable_tunnel)
};

// The rule as a policy rule (for policy_set::with_approval), named `name`. Throws
// std::invalid_argument for a host or prefix a policy could not hold, or a prefix on a tunnel.
rule make_approval_rule(const approval_rule& a, std::string name);

// Adds the rule to the file (made 0600, its directory 0700, when there is none), unless an equal
// rule is there. Throws policy_error for a file that does not parse, file_error when it cannot be
// written.
void append_approved(const std::filesystem::path& file, const approval_rule& a);

}  // namespace broker::config
