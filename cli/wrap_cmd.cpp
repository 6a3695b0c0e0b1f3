// `broker wrap -- CMD`: its options read, then the session assembled and run by wrap::run.
#include <memory>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "wrap/run.hpp"

namespace broker::cli {

void register_wrap(CLI::App& root, int& exit_status, std::vector<std::string> command_line) {
  auto options = std::make_shared<wrap::wrap_config>();
  auto* app = root.add_subcommand("wrap", "Run a command inside a session, with dummy credentials");
  add_common_options(*app, options->common);
  options->common.log_level = "warn";
  app->add_option("--session", options->session, "Session name (default: a random id)");
  app->add_option("--isolate", options->isolate,
                  "auto (netns where the kernel allows, else env with a warning), netns, env")
      ->check(CLI::IsMember({"auto", "netns", "env"}));
  app->add_option("--env-file", options->env_file,
                  "Also write the child environment (KEY=VALUE lines) to this file");
  app->add_option("--timeout", options->timeouts, "NAME=DURATION, as for serve")
      ->allow_extra_args(false);
  app->add_flag("--ask", options->ask,
                "Hold what the policy refuses and ask (broker pending, approve, deny); a layer "
                "that says \"on_deny\": \"deny\" is never asked about");
  app->add_option("--ask-notify", options->ask_notify,
                  "Run this shell command per ask (BROKER_ASK_TEXT, BROKER_ASK_ID, "
                  "BROKER_ASK_URL in its environment)");
  app->add_flag("--learn", options->learn,
                "Let through what the policy refuses for want of an allow rule, recorded as "
                "learned (explicit deny rules and the address guard still hold); then "
                "broker policy suggest");
  app->add_option("--workspace", options->workspaces,
                  "Another directory the command's writes go through to, besides the working "
                  "directory (everything else outside them is kept out when it ends)")
      ->allow_extra_args(false);
  app->add_flag("--scope-to-workspace", options->scope_to_workspace,
                "Scope GitHub credentials to the working directory's origin repository "
                "(REST, git and content of that repository; GraphQL queries only)");
  app->add_option("command", options->command, "The command and its arguments, after --")
      ->required();
  app->callback([options, &exit_status, command_line = std::move(command_line)] {
    // Every argument of the command exactly as given.
    if (!command_line.empty()) options->command = command_line;
    setup_logging(options->common.log_level);
    exit_status = wrap::run(*options);
  });
}

}  // namespace broker::cli
