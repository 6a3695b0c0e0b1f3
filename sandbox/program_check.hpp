// Which "programs" entries a wrap session could defeat (docs/policy.md "A program's identity cannot
// be borrowed"): a glob that could match a file the session can write, or a path naming a file
// its writes go through to. `broker policy check` and `broker wrap` refuse a policy with one,
// naming each. At run time every match is proven besides (config/program_identity.hpp): this is
// the policy saying plainly what it could never safely mean.
//
// Where a netns session writes (docs/security-model.md), and so what no entry may reach:
// - its own directories, private and empty at its start: /tmp, /var/tmp, /run, /var/run,
//   /dev/shm, /dev, $XDG_RUNTIME_DIR, the agents' scratch directories;
// - its copy-on-write layers: the home, $XDG_CONFIG_HOME, $XDG_DATA_HOME, $XDG_STATE_HOME,
//   $XDG_CACHE_HOME, and for a root command /etc, /usr, /var and /opt;
// - the places its writes go through to: the workspaces, the agents' data, the verified caches,
//   files.writable.
// A glob is refused when it starts with "*" (it matches a file anywhere) or when the directory
// before its first wildcard is one of those places, lies in one, or holds one. A path (no
// wildcard) is refused only in a place writes go through to: in a layer or a private directory
// wrap shows the session the host's file itself, read-only, and a file the session makes there
// instead is another file, which never matches.
#pragma once

#include <string>
#include <vector>

#include "config/policy.hpp"
#include "sandbox/home_rules.hpp"

namespace broker::sandbox {

struct writable_place {
  std::string path;  // absolute, normal
  enum kind { own, layer, through } what = own;
  std::string name;  // what it is, for the message ("the home", "files.writable")
};

// The places a session of `in` writes (the home, the caller's environment, the layers'
// files.writable, a root command), with `workspaces` (absolute; wrap knows them, policy check
// does not: any directory may be one).
std::vector<writable_place> session_write_places(const home_rule_inputs& in,
                                                 const std::vector<std::string>& workspaces);

// One refused entry, as policy_error words one: "FILE:LINE: KEY: message".
struct program_problem {
  std::string file;
  int line = 0;
  std::string key;  // "allow[2].programs[0]", "credentials.github.programs[1]"
  std::string message;
  std::string text() const;
};

// Every refused entry of every layer, in the layers' order.
std::vector<program_problem> program_problems(const std::vector<config::policy>& layers,
                                              const std::vector<writable_place>& places);

}  // namespace broker::sandbox
