// The credential files under $HOME a netns-mode child must not read (docs/security-model.md): the
// well-known ones, plus the policy's files.mask, minus files.pass (every layer's pass must agree,
// so that a layer can only narrow).
#pragma once

#include <string>
#include <vector>

#include "config/policy.hpp"

namespace broker::sandbox {

// The paths of a files list (`list`: &files_spec::pass, ::writable...) that every layer which
// lists any agrees on, "~/" expanded with `home`, and made absolute from the working directory
// when `absolute` (a layer can only narrow).
std::vector<std::string> agreed_paths(const std::vector<config::policy>& layers,
                                      std::vector<std::string> config::files_spec::*list,
                                      const std::string& home, bool absolute);

// files.pass ("~/" expanded with `home`): the paths every layer that passes anything passes.
// They are left unmasked, and bound through the child's private /tmp, /run and the like.
std::vector<std::string> passed_paths(const std::vector<config::policy>& layers,
                                      const std::string& home);

// Absolute paths ("~/" expanded with `home`), existing or not; the launcher skips missing ones.
// SSH private keys are every ~/.ssh/id_* without a .pub suffix that exists now.
std::vector<std::string> credential_file_masks(const std::vector<config::policy>& layers,
                                               const std::string& home);

// The broker's own state, hidden from a netns-mode child whatever files.pass says
// (docs/security-model.md): ~/.config/broker (the audit key, the CA), the audit log directory, the
// policy files and every file a credential's source reads ("file:PATH"; an aws-sigv4
// "file:PATH#PROFILE"). A path that holds the working directory cannot be hidden (the command would
// lose its workspace): it is left out and named in `unhidden`.
std::vector<std::string> broker_state_masks(const std::vector<config::policy>& layers,
                                            const std::string& log_dir, const std::string& home,
                                            const std::string& cwd,
                                            std::vector<std::string>* unhidden = nullptr);

}  // namespace broker::sandbox
