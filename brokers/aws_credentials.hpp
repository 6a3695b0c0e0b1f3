// Where a session's real AWS credentials come from: the process environment, a shared
// credentials file (~/.aws/credentials) or a credential_process-style command
// (https://docs.aws.amazon.com/cli/latest/userguide/cli-configure-sourcing-external.html).
#pragma once

#include <array>
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/secret.hpp"
#include "brokers/secret_source.hpp"

namespace broker::brokers {

struct aws_credentials {
  base::secret access_key_id;
  base::secret secret_access_key;
  base::secret session_token;  // empty when there is none
  // When the issuer says they stop working; only process credentials carry one.
  std::optional<std::chrono::system_clock::time_point> expiration;
};

// The default names of the three variables an "env:" source reads.
inline constexpr std::array<std::string_view, 3> default_aws_env_names = {
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"};

// `source` is one of
//  - "env:NAME": the variables env_names[0..2] (key id, secret, session token; a missing or
//    empty entry takes its default name; NAME only appears in messages). nullopt when both the
//    key id and the secret are unset or empty; source_error when only one of them is set.
//  - "file:PATH" or "file:PATH#PROFILE": a shared credentials file (PATH absolute or "~/...",
//    PROFILE "default" when not given). nullopt when the file does not exist or is empty;
//    source_error when the profile or one of its keys is missing or a line is malformed.
//  - "cmd:COMMAND": run like load_secret's cmd: (/bin/sh -c, bounded output and time), its
//    output parsed by parse_process_credentials.
// Messages name the source, the profile and line numbers, never a value.
std::optional<aws_credentials> load_aws_credentials(const std::string& source,
                                                    const std::vector<std::string>& env_names,
                                                    const source_limits& limits = {});

// A credential_process document: {"Version": 1, "AccessKeyId": ..., "SecretAccessKey": ...,
// "SessionToken": ... (optional), "Expiration": "2026-11-30T12:00:00Z" (optional, RFC 3339:
// fractional seconds and a numeric offset accepted)}. Throws source_error for anything else.
aws_credentials parse_process_credentials(std::string_view json);

// The profile `profile` of a shared credentials file's text: "[name]" or "[profile name]"
// sections; aws_access_key_id, aws_secret_access_key and aws_session_token keys (any case);
// whitespace around keys and values trimmed; whole-line '#' and ';' comments. nullopt when the
// profile has no section; source_error (naming `file_name_for_errors` and the profile) when it
// lacks the key id or secret, repeats a key, or any line of the file is malformed.
std::optional<aws_credentials> parse_shared_credentials(std::string_view text,
                                                        std::string_view profile,
                                                        std::string_view file_name_for_errors);

// An RFC 3339 date-time ("2026-11-30T12:00:00Z", "...T12:00:00.123+00:00"); nullopt when it is
// not one.
std::optional<std::chrono::system_clock::time_point> parse_rfc3339(std::string_view text);

}  // namespace broker::brokers
