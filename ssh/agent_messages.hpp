// The agent protocol (draft-miller-ssh-agent) as the session's agent filter reads it
// (docs/security-model.md, "SSH"): what a client inside the session may ask the broker's agent,
// by an allowlist — list the keys, sign, and bind the connection to a server's host key
// (session-bind@openssh.com) — and what the agent answered.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace broker::ssh {

// ssh-agent's own bound on a message (MAX_AGENT_MSG_LEN).
constexpr std::size_t max_agent_message = 256 * 1024;

constexpr std::uint8_t agent_failure = 5;
constexpr std::uint8_t agent_identities_answer = 12;
constexpr std::uint8_t agent_sign_response = 14;

struct client_message {
  enum class kind { list, sign, bind, refused } what = kind::refused;
  std::uint8_t type = 0;
  // refused: the message's name ("remove_all_identities", "lock", "extension query"...).
  std::string name;
  // sign: the key asked for; the user and session of an SSH user authentication it signs
  // (RFC 4252 §7), empty when the data is not one.
  std::string key_fingerprint;
  std::string user;
  std::string session_id;
  // bind: the server's host key, the session it bound, its signature of the exchange, and
  // whether the client forwards the agent over that connection.
  std::string host_key_fingerprint;
  std::string signature;
  bool forwarding = false;
};

// One message's payload (its length already taken off). A message not on the allowlist, or one
// on it that does not parse, is `refused`.
client_message read_client_message(std::string_view payload);

// An identities answer's key count; nullopt when the payload is not one.
std::optional<std::uint32_t> identities_count(std::string_view payload);

// The one-byte failure answer, framed.
std::string failure_answer();

}  // namespace broker::ssh
