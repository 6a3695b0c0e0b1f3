// What the micro-benchmarks share: a session's credentials loaded the way `broker run` loads them
// (credential_set::load over a policy, real values from the environment), with fake values of the
// real shapes, and the request and response texts a coding agent's traffic is made of.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "brokers/credential_set.hpp"

namespace broker::bench {

// The default policy's credentials, every variable they read set to a fake value (AWS with a
// session token, as SSO and STS credentials have). Loaded once: 9 credentials.
const brokers::credential_set& default_credentials();

// `count` bearer credentials (bench_0 .. bench_<count-1>), each bound to its own host
// api<i>.bench.example; loaded once per count. Their real values, for texts that must carry
// them, by bearer_real_value(); never printed.
const brokers::credential_set& bearer_credentials(std::size_t count);
std::string_view bearer_real_value(std::size_t count, std::size_t i);

// The dummy the child sees in `variable` (credential_set::dummy_environment).
std::string dummy_in(const brokers::credential_set& set, std::string_view variable);

// The head of a Chat Completions POST to `host` as the OpenAI Python SDK sends it: 13 fields, one
// of them "Authorization: Bearer <bearer>".
std::string llm_request_head(std::string_view host, std::string_view bearer,
                             std::size_t content_length);
// The head of api.openai.com's answer to it: 18 fields, the body chunked when `chunked`.
std::string llm_response_head(bool chunked, std::size_t content_length = 0);

// A Chat Completions request body of `size` bytes: a conversation of prose and code, with no
// credential in it.
std::string llm_request_body(std::size_t size);

// `size` bytes of a streamed chat completion (server-sent events, one JSON delta of a few words
// each), with no credential in it.
std::string llm_stream_text(std::size_t size);

}  // namespace broker::bench
