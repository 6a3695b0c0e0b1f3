// What of an agent's settings file goes back to the host when a session changed it
// (docs/security-model.md): only the members its profile names as data (model, theme, trusted
// folders, the approved-key list, history...). Every other member, known or new (hooks, MCP
// servers, plugins, permission modes, env, helpers), stays as the host has it, and the session's
// file is set aside. Files are read by a real parser of their format (nlohmann's JSON, toml++'s
// TOML), never by a line parser of ours, and what goes back is what that parser read. Pure text in,
// text out.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace broker::sandbox {

enum class settings_format { json, toml };

// The members of a settings file that are data. Each is a path of member names joined by
// dots: "*" is any one member; "{workspace}" is a member named by one of `workspaces` or a
// directory in one (a trusted folder may be the session's own, never "/"). A member under a
// listed one is data too. Names in documents may hold dots; paths are matched name by name.
struct member_rules {
  std::vector<std::string> data;
  std::vector<std::string> workspaces;
};

struct settings_merge {
  // False: the session's file is no document of its format; nothing of it can be checked, so
  // none of it goes back.
  bool readable = true;
  // The host's file as it should be now, or nullopt to leave it as it is. When the session
  // changed data members only, and the host's file is still as it was, this is the session's
  // own text (its layout kept).
  std::optional<std::string> text;
  // The members the session changed that are not data, dotted, for the user.
  std::vector<std::string> kept;
};

// `base`: the host's file when the session started ("" when there was none); `host`: the
// host's file now (""); `session`: the session's version. What the session changed since
// `base` in data members is applied to `host` (made, changed or removed), everything else it
// changed is named in `kept`. A host file that cannot be read takes nothing (and is named).
settings_merge merge_settings(settings_format format, const member_rules& rules,
                              std::string_view base, std::string_view host,
                              std::string_view session);

}  // namespace broker::sandbox
