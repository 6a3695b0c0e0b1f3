// aws-sigv4 "assume_role" (docs/policy.md, "Minted credentials"): temporary credentials from STS
// AssumeRole with the credential's inline session policy, requested with a SigV4 signature made
// with the long-lived key. The session's requests are re-signed with the temporary credentials,
// fetched again before they expire (aws_broker.hpp); the long-lived key signs only this call.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "brokers/aws_credentials.hpp"
#include "brokers/aws_signing.hpp"
#include "brokers/provider_transport.hpp"
#include "config/policy.hpp"

namespace broker::brokers {

inline constexpr std::string_view sts_endpoint = "https://sts.amazonaws.com/";

// The AssumeRole call (POST to the global endpoint, region us-east-1, form body with RoleArn,
// RoleSessionName, DurationSeconds and Policy), signed with `long_lived` at `now`. Its
// Authorization header holds a signature only; the caller wipes the request all the same.
provider_request assume_role_request(const config::assume_role_spec& role,
                                     const aws_credentials& long_lived,
                                     std::string_view session_name,
                                     std::chrono::system_clock::time_point now);

// STS's answer: the credentials, or mint_error with the status and STS's error code and message.
aws_real_credentials parse_assume_role_answer(const provider_answer& answer);

// A RoleSessionName for one session: "broker-" and 16 random hex digits.
std::string new_role_session_name();

}  // namespace broker::brokers
