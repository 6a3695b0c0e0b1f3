// The variables that put a process inside a session (docs/security-model.md): the proxy in every
// spelling clients read, the trust bundle for every client that takes one, and the dummy
// credentials. `serve --env-file` writes them; `wrap` sets them in the child.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace broker::session {

using variable = std::pair<std::string, std::string>;

// `proxy_url` "http://127.0.0.1:PORT"; `trust_bundle` the file of system roots + session CA
// (empty: no trust variables); `dummies` NAME → dummy value.
std::vector<variable> child_environment(const std::string& proxy_url,
                                        const std::string& trust_bundle,
                                        const std::vector<variable>& dummies);

// KEY=VALUE lines.
std::string render_env_lines(const std::vector<variable>& vars);

}  // namespace broker::session
