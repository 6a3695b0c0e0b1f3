#include "cli/common.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>

#include "config/units.hpp"
#include "session/audit_sync.hpp"
#include "session/control_socket.hpp"
#include "session/log_reader.hpp"
#include "session/session_dir.hpp"

namespace broker::cli {

void add_log_dir_option(CLI::App& app, std::string& log_dir) {
  app.add_option("--log-dir", log_dir,
                 "Audit log directory (default $XDG_STATE_HOME/broker/sessions)");
}

void add_common_options(CLI::App& app, common_options& o) {
  // Repeatable options take one value per occurrence, so that `wrap ... --policy F -- CMD`
  // does not read CMD's arguments as more policy files.
  app.add_option("--policy", o.policies,
                 "Policy file; repeat for more layers (each can only narrow)")
      ->allow_extra_args(false);
  add_log_dir_option(app, o.log_dir);
  app.add_option("--connect-to", o.connect_to,
                 "HOST:PORT:ADDR:PORT - dial ADDR:PORT for HOST:PORT (curl semantics)")
      ->allow_extra_args(false);
  app.add_option("--upstream-ca", o.upstream_cas, "Extra CA file for verifying upstreams")
      ->allow_extra_args(false);
  app.add_option("--log-level", o.log_level, "Operational log level on stderr")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));
  // A bad value is a usage error at parse time (CLI::ValidationError), before any session runs.
  app.add_option_function<std::string>(
         "--audit-rotate-size",
         [&o](const std::string& text) {
           const auto size = config::parse_size(text);
           if (!size)
             throw CLI::ValidationError("--audit-rotate-size",
                                        "\"" + text + "\" is not a size (e.g. 100MB, 512KiB, 0)");
           o.audit_rotation.max_bytes = *size;
         },
         "Start a new audit file before one would pass SIZE (e.g. 100MB; 0: never)")
      ->type_name("SIZE");
  app.add_option_function<std::string>(
         "--audit-rotate-age",
         [&o](const std::string& text) {
           const auto age = config::parse_duration(text);
           if (!age)
             throw CLI::ValidationError("--audit-rotate-age",
                                        "\"" + text + "\" is not a duration (e.g. 1h, 30m, 0)");
           o.audit_rotation.max_age = *age;
         },
         "Start a new audit file once the current one's first record is DURATION old (e.g. "
         "1h; 0: never)")
      ->type_name("DURATION");
  app.add_option_function<std::string>(
         "--audit-sync",
         [&o](const std::string& text) {
           const auto mode = session::parse_audit_sync(text);
           if (!mode)
             throw CLI::ValidationError("--audit-sync",
                                        "\"" + text + "\" is not one of every, batch, none");
           o.audit_sync = *mode;
         },
         "When audit records reach the disk: fdatasync after each (every), within 100 ms, "
         "shared (batch, the default), or as the kernel writes back (none)")
      ->type_name("every|batch|none");
}

void setup_logging(const std::string& level) {
  auto logger = spdlog::stderr_color_mt("broker");
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(level));
}

std::vector<std::filesystem::path> running_control_sockets() {
  std::vector<std::filesystem::path> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(session::runtime_base(), ec)) {
    const auto socket = entry.path() / "control.sock";
    if (std::filesystem::exists(socket, ec)) out.push_back(socket);
  }
  return out;
}

std::filesystem::path control_socket_of(const std::string& session) {
  if (!valid_session_name(session)) throw std::runtime_error(session + ": not a session name");
  return session::runtime_base() / session / "control.sock";
}

std::vector<std::filesystem::path> control_sockets(const std::string& session) {
  if (session.empty()) return running_control_sockets();
  return {control_socket_of(session)};
}

std::filesystem::path gateway_control_socket(const std::string& name) {
  if (!name.empty()) return control_socket_of(name);
  std::vector<std::filesystem::path> gateways;
  for (const auto& socket : running_control_sockets()) {
    try {
      const auto status = nlohmann::json::parse(session::control_request(socket, "status"));
      if (status.value("mode", "") == "gateway") gateways.push_back(socket);
    } catch (const std::exception&) {
      // Not answering: not a gateway to use.
    }
  }
  if (gateways.size() == 1) return gateways.front();
  if (gateways.empty())
    throw std::runtime_error(
        "no gateway is running here (start one with `broker serve --gateway`)");
  std::string names;
  for (const auto& g : gateways) names += " " + g.parent_path().filename().string();
  throw std::runtime_error("several gateways run here; name one with --gateway:" + names);
}

}  // namespace broker::cli
