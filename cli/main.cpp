// broker: a credential-brokering egress proxy for AI coding agents (see README.md).
#include <csignal>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include <openssl/crypto.h>

#include "cli/commands.hpp"
#include "cli/common.hpp"

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);
  // The process's end frees OpenSSL's tables; its own clean-up at exit would only walk and free
  // them first (~0.5 ms of every `broker wrap`). Takes effect on OpenSSL's first initialization.
  OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, nullptr);
  CLI::App app{"broker: a credential-brokering egress proxy for AI coding agents"};
  app.set_version_flag("--version", std::string("broker ") + BROKER_VERSION);
  app.require_subcommand(1);
  int exit_status = broker::cli::exit_ok;
  broker::cli::register_serve(app, exit_status);
  broker::cli::register_policy(app, exit_status);
  broker::cli::register_log(app, exit_status);
  broker::cli::register_sessions(app, exit_status);
  broker::cli::register_session(app, exit_status);
  broker::cli::register_admin_token(app, exit_status);
  broker::cli::register_ca(app, exit_status);
  std::vector<std::string> command_line;
  for (int i = 1; i < argc; ++i)
    if (std::string_view(argv[i]) == "--") {
      command_line.assign(argv + i + 1, argv + argc);
      break;
    }
  broker::cli::register_wrap(app, exit_status, std::move(command_line));
  broker::cli::register_control(app, exit_status);
  broker::cli::register_demo(app, exit_status);
  broker::cli::register_keep(app, exit_status);
  broker::cli::register_approvals(app, exit_status);
  broker::cli::register_mcp(app, exit_status);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    if (rc == 0) return 0;
    // wrap's own failures are 125, so they cannot be mistaken for the command's status.
    return argc > 1 && std::string_view(argv[1]) == "wrap" ? 125 : broker::cli::exit_usage;
  }
  std::fflush(stdout);
  return exit_status;
}
