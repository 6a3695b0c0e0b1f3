// What of a session's writes outside its workspace goes through to the host, and how
// (docs/security-model.md). Everything the command writes in the home (and the other copy-on-write
// places) is the session's own and is kept out when it ends, but for what a rule here names:
// - `through`: the agents' own data (transcripts, history, todos, logs; never their instruction
//   or memory files, which every later session reads as instructions), caches that verify every
//   entry by its hash when they read it (npm's _cacache, Go's module cache), and files.writable.
//   An existing directory is bound from the host, live; anything else goes back at the end.
// - `settings`: an agent's settings file, whose data members go back (settings_merge.hpp).
// - `key_store`: where an agent stores the key it was given (a dummy, under broker): kept for
//   broker's next session, never in the home, where the agent outside broker would send it.
// - `dropped`: caches that nothing verifies on read, and what an agent makes again every
//   session (its own programs, shell snapshots): the session's changes are thrown away rather
//   than set aside, since a poisoned entry there would run later.
#pragma once

#include <string>
#include <vector>

#include "config/policy.hpp"
#include "sandbox/settings_merge.hpp"

namespace broker::sandbox {

struct home_rule {
  enum kind { through, settings, key_store, dropped } what = through;
  std::string path;  // absolute, normal
  // settings: the file's format and its data members (member_rules::data).
  settings_format format = settings_format::json;
  std::vector<std::string> data;
  std::string why;  // dropped: what it is, for the record ("a cache")
  // through: a cache that verifies what it reads (nothing in it is a repository the user works
  // in, and it may hold many files: its git directories are not looked for).
  bool cache = false;
};

// Where the rules come from besides the home: the caller's environment (XDG_CACHE_HOME,
// CODEX_HOME, GOMODCACHE, GOPATH, npm_config_cache) and the policy's files.writable.
struct home_rule_inputs {
  std::string home;
  std::vector<std::pair<std::string, std::string>> env;
  std::vector<config::policy> layers;
  bool root = false;  // a root command: the system's caches (/var/cache, apt's lists) too
};

class home_rules {
 public:
  explicit home_rules(const home_rule_inputs& in);

  // The rule for `path` (absolute, normal): the deepest one at or above it; null for none.
  const home_rule* find(const std::string& path) const;
  // Whether some rule lies strictly below `dir` (a directory the session made must then be
  // looked into entry by entry rather than judged whole).
  bool any_below(const std::string& dir) const;

  const std::vector<home_rule>& all() const { return rules_; }
  // The existing directories of the agents' background servers (Codex's app-server daemon and
  // its control socket's directory), shown to the session as empty private directories: the
  // host's daemon, running outside, must not be reachable or started from inside.
  std::vector<std::string> scratch_directories() const;

 private:
  std::vector<home_rule> rules_;
  std::vector<std::string> scratch_;
};

// files.writable of every layer, "~/" expanded, absolute: only the paths every layer that lists
// any agrees on (a layer can only narrow).
std::vector<std::string> writable_paths(const std::vector<config::policy>& layers,
                                        const std::string& home);

// files.readonly of every layer, "~/" expanded, absolute (any layer's counts).
std::vector<std::string> readonly_paths(const std::vector<config::policy>& layers,
                                        const std::string& home);

}  // namespace broker::sandbox
