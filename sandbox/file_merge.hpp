// What goes back from a session's layer when the host's file changed meanwhile too (two
// sessions of one agent at once; docs/security-model.md). Pure text in, text out.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace broker::sandbox {

// Three versions of a file: `base` (the host's at the session's start), `host` (the real file
// now), `child` (the session's). Two JSON objects merge member by member, recursively (a member
// only the child changed takes the child's value, one only the host changed the host's, one both
// changed the child's); two texts that both only appended to `base` merge as the host's text plus
// the child's appended part. nullopt when neither applies (a conflict).
std::optional<std::string> merge_three(std::string_view base, std::string_view host,
                                       std::string_view child);

}  // namespace broker::sandbox
