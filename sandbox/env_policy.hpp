// Which variables of the broker's environment reach the wrapped child (docs/security-model.md):
// brokered credentials become their dummies, other secret-looking variables are removed unless
// `env.pass` keeps them, `env.strip` removes more, and the session's proxy/trust variables win over
// all.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "config/policy.hpp"
#include "session/child_env.hpp"

namespace broker::sandbox {

using variable = session::variable;

// The env sections of all policy layers, merged so that adding a layer can only narrow:
// `pass` holds the names listed in the pass list of EVERY layer that has a non-empty one (a layer
// without env.pass expresses no opinion; no layer with one -> empty); `strip` is the union of all
// layers' strip lists. Names are exact and case-sensitive, deduplicated, in first-seen order.
struct env_rules {
  std::vector<std::string> pass;   // kept even if secret-looking
  std::vector<std::string> strip;  // always removed (strip wins over pass)
};
env_rules merge_env_rules(const std::vector<config::policy>& layers);

// A credential's variable: NAME, its per-session dummy, and the credential that owns it.
struct brokered_var {
  std::string name;
  std::string value;
  std::string credential;
};

// A brokered variable as reported: no value, only the name and its credential.
struct brokered_name {
  std::string name;
  std::string credential;
};

struct env_plan {
  // The child's environment, names unique: the kept parent variables in parent order, then the
  // dummies in the order given, then the session variables in the order given.
  std::vector<variable> env;
  std::vector<brokered_name> brokered;  // dummies actually set, in the order given
  // Parent variables the child does not get and nothing of the session replaces (names only,
  // parent order). A parent variable replaced by a dummy or a session variable is not listed.
  std::vector<std::string> removed;
};

// Decides each parent variable (first occurrence of a name wins), in this precedence:
//  1. a session variable of the same name, compared case-insensitively, replaces it;
//  2. a brokered name gets its dummy (a dummy whose name a session variable has is dropped);
//  3. proxy settings (name ends in "_PROXY" or "NOPROXY", any case) are removed: they would route
//     around the broker or exempt hosts from it, and the session sets its own;
//  4. `rules.strip` names are removed, even harmless ones;
//  5. `rules.pass` names are kept, even secret-looking ones;
//  6. looks_secret() variables are removed; everything else is kept unchanged (LD_PRELOAD too).
// `session_vars` are the proxy + trust variables (session::child_environment with no dummies).
env_plan plan_child_environment(const std::vector<variable>& parent,
                                const std::vector<brokered_var>& dummies,
                                const std::vector<variable>& session_vars, const env_rules& rules);

// The one stderr line (docs/security-model.md), names only, never values; "none" for an empty list:
// "broker: session s-1a2b: brokered GITHUB_TOKEN (github), OPENAI_API_KEY (openai); removed
// AWS_SECRET_ACCESS_KEY, SSH_AUTH_SOCK; isolation: netns". Control characters become '?'.
// Login files shown as dummy copies follow the variables: "/home/u/.codex/auth.json (codex_login)".
std::string describe(const std::string& session, const env_plan& plan, const std::string& isolation,
                     const std::vector<std::pair<std::string, std::string>>& files = {});

// Is this variable secret-looking? By name, compared case-insensitively:
//  - contains TOKEN, SECRET, PASSWORD, PASSWD, PASSPHRASE, APIKEY, API_KEY, PRIVATE_KEY,
//    PRIVATEKEY, CREDENTIAL, ACCESS_KEY or ACCESSKEY anywhere (so GITHUBTOKEN matches too), or
//    has KEY, AUTH or PAT as a whole '_'-separated word (STRIPE_KEY, NPM_CONFIG__AUTH, GH_PAT;
//    not KEYBOARD or PATH), unless it is a known-harmless name (TOKENIZERS_PARALLELISM);
//  - is a known cloud/registry/agent variable that holds or points at a secret (SSH_AUTH_SOCK,
//    KUBECONFIG, AWS_CONFIG_FILE, NETRC, GIT_ASKPASS, DOCKER_CONFIG, OP_SESSION_*...).
// By value (case-sensitive), whatever the name: a known token prefix at a word start (start of
// the value or after a non-alphanumeric byte) followed by enough token characters to be a real
// one (ghp_ gho_ ghu_ ghs_ ghr_ github_pat_ sk- sk-ant- xox[abpre]- AKIA/ASIA+16 glpat- npm_+36
// pypi- hf_ AIza ya29. and JWTs "eyJ<...>.eyJ<...>"), a PEM "-----BEGIN ... PRIVATE KEY" header, or
// a URL with a password ("scheme://user:password@host").
bool looks_secret(std::string_view name, std::string_view value);

}  // namespace broker::sandbox
