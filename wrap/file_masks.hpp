// The credential files under $HOME a netns-mode child must not read (DESIGN §8): the well-known
// ones, plus the policy's files.mask, minus files.pass (every layer's pass must agree, so that a
// layer can only narrow).
#pragma once

#include <string>
#include <vector>

#include "config/policy.hpp"

namespace broker::wrap {

// files.pass ("~/" expanded with `home`): the paths every layer that passes anything passes.
// They are left unmasked, and bound through the child's private /tmp, /run and the like.
std::vector<std::string> passed_paths(const std::vector<config::policy>& layers,
                                      const std::string& home);

// Absolute paths ("~/" expanded with `home`), existing or not; the launcher skips missing ones.
// SSH private keys are every ~/.ssh/id_* without a .pub suffix that exists now.
std::vector<std::string> credential_file_masks(const std::vector<config::policy>& layers,
                                               const std::string& home);

// The broker's own state, hidden from a netns-mode child whatever files.pass says (DESIGN
// §8.1): ~/.config/broker (the audit key, the CA), the audit log directory, the policy files
// and every file a credential's source reads ("file:PATH"; an aws-sigv4 "file:PATH#PROFILE").
// A path that holds the working directory cannot be hidden (the command would lose its
// workspace): it is left out and named in `unhidden`.
std::vector<std::string> broker_state_masks(const std::vector<config::policy>& layers,
                                            const std::string& log_dir, const std::string& home,
                                            const std::string& cwd,
                                            std::vector<std::string>* unhidden = nullptr);

// What a netns-mode child must not leave for a program outside the session to run later
// (DESIGN §8.1): shell startup files, git's and ssh's configuration, systemd user units and
// autostart entries, package managers' sources and init scripts under `home`, and every
// layer's files.readonly ("~/" expanded), existing or not, each with why (for the user); less
// the floor's paths files.writable opens (those every layer that lists any agrees on).
struct protected_path {
  std::string path;
  const char* reason;
  // What the child made there is removed rather than set aside: an agent's own programs, which
  // it installs again every session (hundreds of MB each time).
  bool discard = false;
};
std::vector<protected_path> persistence_paths(const std::vector<config::policy>& layers,
                                              const std::string& home);

// Those that exist (but the discarded ones, scratch_directories): read-only inside. A missing one
// is kept out of the host when the child makes it (home_guard.hpp); creating an empty one on the
// user's behalf would change their shells (an empty ~/.bash_profile hides ~/.profile).
std::vector<std::string> read_only_files(const std::vector<config::policy>& layers,
                                         const std::string& home);

// The existing directories of the paths whose new content is discarded (an agent's own
// programs): the child sees each as an empty private directory (a tmpfs), where the agent
// installs them again, gone when the session ends; the host's copy is neither seen nor changed.
std::vector<std::string> scratch_directories(const std::vector<config::policy>& layers,
                                             const std::string& home);

}  // namespace broker::wrap
