#include "cli/common.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <stdexcept>

#include "config/units.hpp"
#include "session/log_reader.hpp"
#include "wrap/session_dir.hpp"

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
}

void setup_logging(const std::string& level) {
  auto logger = spdlog::stderr_color_mt("broker");
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(level));
}

std::vector<config::policy> load_layers(const std::vector<std::string>& files) {
  std::vector<config::policy> layers;
  std::error_code ec;
  if (std::filesystem::exists(team_policy_path, ec))
    layers.push_back(config::load_policy_file(team_policy_path));
  for (const auto& f : files) layers.push_back(config::load_policy_file(f));
  if (layers.empty())
    layers.push_back(config::parse_policy(config::default_policy_text(), "<default>"));
  return layers;
}

std::filesystem::path log_dir_or_default(const std::string& log_dir) {
  return log_dir.empty() ? session::default_log_dir() : std::filesystem::path(log_dir);
}

std::vector<proxy::connect_to_rule> parse_connect_to_rules(const std::vector<std::string>& specs) {
  std::vector<proxy::connect_to_rule> rules;
  for (const auto& s : specs) rules.push_back(proxy::parse_connect_to(s));
  return rules;
}

void check_upstream_cas(const std::vector<std::string>& files) {
  for (const auto& f : files) {
    std::ifstream in(f);
    if (!in) throw std::invalid_argument("--upstream-ca " + f + ": cannot read the file");
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (text.find("-----BEGIN CERTIFICATE-----") == std::string::npos)
      throw std::invalid_argument("--upstream-ca " + f + ": no PEM certificate in the file");
  }
}

int loopback_listener(std::uint16_t& port) {
  const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (s < 0 || ::bind(s, reinterpret_cast<sockaddr*>(&address), sizeof address) < 0 ||
      ::listen(s, SOMAXCONN) < 0 ||
      ::getsockname(s, reinterpret_cast<sockaddr*>(&address), &length) < 0) {
    if (s >= 0) ::close(s);
    throw std::runtime_error("cannot listen on 127.0.0.1");
  }
  port = ntohs(address.sin_port);
  return s;
}

bool valid_session_name(const std::string& name) {
  if (name.empty() || name.size() > 64 || name.front() == '.') return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::vector<std::filesystem::path> running_control_sockets() {
  std::vector<std::filesystem::path> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(wrap::runtime_base(), ec)) {
    const auto socket = entry.path() / "control.sock";
    if (std::filesystem::exists(socket, ec)) out.push_back(socket);
  }
  return out;
}

std::filesystem::path control_socket_of(const std::string& session) {
  if (!valid_session_name(session)) throw std::runtime_error(session + ": not a session name");
  return wrap::runtime_base() / session / "control.sock";
}

}  // namespace broker::cli
