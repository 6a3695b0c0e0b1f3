// The broker's own HTTPS calls to a credential provider (an OAuth token endpoint, GitHub's App
// API, AWS STS): one request, its answer whatever the status. live/token_client.hpp makes the
// one the session uses (--connect-to and --upstream-ca honoured, peers verified, a deadline).
#pragma once

#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace broker::brokers {

struct provider_request {
  std::string method;  // "POST", "DELETE"...
  std::string url;     // "https://host[:port]/path"
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;  // may hold a secret (a signed assertion): the transport wipes its copy
};

struct provider_answer {
  int status = 0;
  std::string body;
  // The answer's header fields as they came (an MCP server's Mcp-Session-Id, a content type).
  std::vector<std::pair<std::string, std::string>> headers = {};
};

// Throws source_error (brokers/secret_source.hpp) when no answer arrives.
using provider_transport = std::function<provider_answer(const provider_request&)>;

// A credential minted for the session (docs/policy.md, "Minted credentials") that could not be
// had: the provider's status (0 when no answer came) and why, never a value.
class mint_error : public std::runtime_error {
 public:
  mint_error(int status, const std::string& why) : std::runtime_error(why), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

}  // namespace broker::brokers
