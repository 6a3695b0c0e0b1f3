// The credential files under $HOME a netns-mode child must not read (DESIGN §8): the well-known
// ones, plus the policy's files.mask, minus files.pass (every layer's pass must agree, so that a
// layer can only narrow).
#pragma once

#include <string>
#include <vector>

#include "config/policy.hpp"

namespace broker::wrap {

// Absolute paths ("~/" expanded with `home`), existing or not; the launcher skips missing ones.
// SSH private keys are every ~/.ssh/id_* without a .pub suffix that exists now.
std::vector<std::string> credential_file_masks(const std::vector<config::policy>& layers,
                                               const std::string& home);

}  // namespace broker::wrap
