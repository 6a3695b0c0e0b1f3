// What a session changed in its copy-on-write layers, judged when it ends (docs/security-model.md).
// The walk is of the layers' upper directories alone, so the work is in proportion to what changed,
// never to the size of the home. What a home rule lets through goes to the host (an agent's data
// merged with what the host wrote meanwhile, its settings' data members, a stored key to
// broker's own store); a dropped place's changes are thrown away; everything else is kept out:
// the session's version set aside under the kept root, the host's file as it was. A file the
// session only opened for writing, unchanged, is nothing.
#pragma once

#include <sys/types.h>

#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "sandbox/home_rules.hpp"
#include "sandbox/kept.hpp"

namespace broker::sandbox {

// The files the home rules name (settings files, agents' data files in a layer) as they were
// when the session started: what the session's changes are told from, and merged against.
class start_files {
 public:
  explicit start_files(const home_rules& rules);

  struct file {
    std::string path;
    dev_t dev = 0;
    ino_t ino = 0;
    off_t size = 0;
    timespec mtime{};
    std::shared_ptr<const std::string> bytes;  // null when too large to keep
  };
  const file* find(const std::string& path) const;

 private:
  std::vector<file> files_;
};

struct layer_return_inputs {
  int upper = -1;                   // the tmpfs of the layers' upper directories
  std::vector<std::string> layers;  // each layer's path, in order ("N/u" is the N-th's upper)
  std::vector<bool> mounted;        // which were made
  const home_rules* rules = nullptr;
  const start_files* started = nullptr;
  std::string home;
  std::vector<std::string> workspaces;
  std::vector<std::string> placed;  // what the layers held from the start: not the session's
};

struct layers_returned {
  std::vector<kept_out> kept;
  std::vector<std::string> went;      // real paths taken in
  std::vector<std::string> warnings;  // for the user
};

layers_returned return_layers(const layer_return_inputs& in, const std::string& kept_root);

}  // namespace broker::sandbox
