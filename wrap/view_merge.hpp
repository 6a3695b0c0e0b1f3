// What goes back from a directory view when the host's file changed meanwhile too (two sessions
// of one agent at once), and what of an agent's settings never goes back (DESIGN §8.1). Pure
// text in, text out.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace broker::wrap {

// Three versions of a file: `base` (as copied into the view), `host` (the real file now),
// `child` (the view's). Two JSON objects merge member by member, recursively (a member only the
// child changed takes the child's value, one only the host changed the host's, one both changed
// the child's); two texts that both only appended to `base` merge as the host's text plus the
// child's appended part. nullopt when neither applies (a conflict).
std::optional<std::string> merge_three(std::string_view base, std::string_view host,
                                       std::string_view child);

// An agent's settings file and the members in it that name commands to run.
struct settings_file {
  enum class format { json, toml } kind;
  std::vector<std::string> keys;  // JSON: dotted member paths, "*" any member; TOML: keys/tables
};

// `child` with every listed member as `host` has it (absent where the host has none); the
// listed members the child had changed go to `changed`. JSON: nullopt when `child` is no JSON
// object (it cannot be checked). TOML: `child` itself when none changed, else `host`.
std::optional<std::string> keep_host_commands(const settings_file& file, std::string_view host,
                                              std::string_view child,
                                              std::vector<std::string>& changed);

}  // namespace broker::wrap
