// `broker mcp pin URL` (docs/policy.md, "Pins"): the pins file of an MCP server's tools, printed
// for a team to ship beside its policy ("mcp": {"pins": "FILE"}).
#include <cstdlib>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "live/session_setup.hpp"
#include "live/token_client.hpp"
#include "mcp/pin_client.hpp"

namespace broker::cli {

namespace {

struct pin_options {
  std::string url;
  std::vector<std::string> headers;
  std::string token_env;
  std::vector<std::string> connect_to;
  std::vector<std::string> upstream_cas;
  int timeout_s = 30;
};

int run_pin(const pin_options& o) {
  try {
    if (!o.url.starts_with("https://"))
      throw std::invalid_argument("the server's URL must be https:// (as the broker reaches it)");
    std::vector<std::pair<std::string, std::string>> headers;
    for (const auto& h : o.headers) {
      const auto colon = h.find(':');
      if (colon == std::string::npos || colon == 0)
        throw std::invalid_argument("--header expects \"Name: value\"");
      std::string value = h.substr(colon + 1);
      if (!value.empty() && value.front() == ' ') value.erase(0, 1);
      headers.emplace_back(h.substr(0, colon), value);
    }
    if (!o.token_env.empty()) {
      const char* token = std::getenv(o.token_env.c_str());
      if (!token || !*token)
        throw std::invalid_argument("--token-env " + o.token_env + " is empty");
      headers.emplace_back("Authorization", std::string("Bearer ") + token);
    }
    std::vector<std::filesystem::path> cas(o.upstream_cas.begin(), o.upstream_cas.end());
    const auto transport = live::make_provider_transport(live::parse_connect_to_rules(o.connect_to),
                                                         cas, std::chrono::seconds(o.timeout_s));
    std::cout << mcp::pin_server(o.url, transport, headers).dump(2) << "\n";
    return exit_ok;
  } catch (const std::exception& e) {
    std::cerr << "broker: mcp pin " << o.url << ": " << e.what() << "\n";
    return exit_failure;
  }
}

}  // namespace

void register_mcp(CLI::App& root, int& exit_status) {
  auto* mcp = root.add_subcommand("mcp", "MCP servers: their pins");
  mcp->require_subcommand(1);
  auto o = std::make_shared<pin_options>();
  auto* pin = mcp->add_subcommand(
      "pin", "Print the pins file of an MCP server's tools (for \"mcp\": {\"pins\": FILE})");
  pin->add_option("url", o->url, "The server's streamable HTTP endpoint (https://...)")->required();
  pin->add_option("--header", o->headers, "A header for every request (\"Name: value\")");
  pin->add_option("--token-env", o->token_env,
                  "A variable holding a bearer token for the server (sent as Authorization)");
  pin->add_option("--connect-to", o->connect_to, "HOST:PORT:ADDR:PORT2, as curl's");
  pin->add_option("--upstream-ca", o->upstream_cas, "A CA file trusted for the server");
  pin->add_option("--timeout", o->timeout_s, "Seconds for each request (default 30)");
  pin->callback([o, &exit_status] { exit_status = run_pin(*o); });
}

}  // namespace broker::cli
