// An agent's own login file as a credential (docs/agents.md): Codex's ~/.codex/auth.json, Claude
// Code's ~/.claude/.credentials.json, Gemini CLI's ~/.gemini/oauth_creds.json. The child sees a
// copy of the file with every listed value replaced by a same-shaped dummy (a JWT keeps its
// claims), at the file's usual path; its family (bearer, github, header) carries each value as
// it carries any token.
//
// OAuth refresh: a POST to the credential's token endpoint carrying a refresh-token dummy (JSON
// or form body) gets the current real refresh token instead; the token response's new access,
// refresh and id tokens become fresh dummies before the child reads them, the broker swaps with
// the new real values from then on, and writes them back to the real file (in place, as the
// agents do: a rename would detach the child's view of it), so the user's login outlives the
// session (refresh tokens are single-use). The real file is opened once, before the child
// starts, and only ever read and written through that descriptor (real_file.hpp); once the path
// names another file, no refresh token is redeemed. A file that changed since it was read
// (another session refreshed) is not overwritten, and its newer tokens are used.
#pragma once

#include <memory>
#include <string>

#include "brokers/request_broker.hpp"

namespace broker::brokers {

class stable_dummies;

// The most of a token response read whole to be rewritten.
inline constexpr std::size_t max_token_response = 256 * 1024;

// The broker for spec.login_file, or null with `why` set when the file is missing or holds no
// listed value. `home` expands a "~/" path. Throws source_error for a file that exists but is
// unreadable, no regular file (a link, a FIFO) or no JSON object (naming the file and a byte
// offset, never a value). With `stable` (wrap), members no refresh renews (an API key beside
// the tokens, gh's oauth_token) get the user's stable dummies; OAuth tokens random ones.
std::unique_ptr<request_broker> make_login_file_broker(
    const config::credential_spec& spec, request_broker::layer_bindings other_layers,
    const std::string& home, std::string& why,
    std::shared_ptr<const stable_dummies> stable = nullptr);

}  // namespace broker::brokers
