// Where a netns session's writes go (docs/security-model.md), planned by the broker before its
// command starts: the copy-on-write layers (the home, $XDG_CONFIG_HOME, $XDG_DATA_HOME,
// $XDG_STATE_HOME and $XDG_CACHE_HOME wherever they point, and for a root command /etc, /usr, /var
// and /opt), the places its writes go through to (the workspaces; the home rules' existing
// directories: the agents' data, verified caches, files.writable), and what the layers hold from
// the start (login files' dummy copies, the agents' stored keys, names that stay missing). All else
// of the host is read-only inside; the private IPC directories are as private_dirs.hpp makes them.
// The steps come out in the order init mounts them.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "sandbox/child_session.hpp"
#include "sandbox/home_rules.hpp"

namespace broker::sandbox {

struct layer_inputs {
  std::string home, cwd;
  std::vector<std::string> workspaces;                   // --workspace, absolute
  std::vector<std::pair<std::string, std::string>> env;  // the caller's (XDG_* variables)
  bool root = false;  // the command runs as root: the system's layers too
  const home_rules* rules = nullptr;
  std::vector<std::string> masks;  // those missing and in a layer stay missing
  std::vector<std::pair<std::string, std::string>> login_copies;  // the copy, its target
  std::vector<std::string> kept;        // seen through the private directories (private_dirs)
  std::vector<view_step> private_dirs;  // the directories made private (host_ipc_dirs)
  std::string mountinfo;                // the host's /proc/self/mountinfo
};

struct layer_plan {
  std::vector<view_step> steps;
  std::vector<std::string> layers;      // the layer steps' paths, in order
  std::vector<std::string> workspaces;  // the workspaces kept, canonical
  std::vector<std::string> through;     // bound through besides the workspaces, canonical
  std::vector<launch_options::seed> seeds;
  std::vector<std::string> warnings;  // for the user
};

layer_plan plan_layers(const layer_inputs& in);

// Where an agent's stored key at `real` is kept between sessions: under
// ~/.config/broker/agent-files, at its path from the home (hidden from sessions).
std::string agent_store_path(const std::string& home, const std::string& real);

}  // namespace broker::sandbox
