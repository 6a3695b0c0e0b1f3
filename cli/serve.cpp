// `broker serve`: one session on a listening address, until SIGINT/SIGTERM (DESIGN §3).
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <thread>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "config/policy_set.hpp"
#include "proxy/server.hpp"
#include "proxy/target.hpp"
#include "session/log_reader.hpp"

namespace broker::cli {

namespace {

struct serve_options {
  common_options common;
  std::string listen;
  std::string session;
  std::string env_file;
  std::vector<std::string> timeouts;
};

// "127.0.0.1:8080" or "[::1]:8080"; the host must be an IP address.
bool split_listen(const std::string& text, std::string& host, std::uint16_t& port) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  host = text.substr(0, colon);
  if (host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  try {
    const auto value = std::stoul(text.substr(colon + 1));
    if (value > 65535) return false;
    port = static_cast<std::uint16_t>(value);
  } catch (const std::exception&) {
    return false;
  }
  return true;
}

// The child environment: proxy variables in both cases, as curl, git, python, node, npm and
// pip read them (DESIGN §8).
std::string render_env_file(const std::string& proxy_url) {
  std::string out;
  for (const char* name : {"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
                           "all_proxy", "npm_config_proxy", "npm_config_https_proxy", "PIP_PROXY"})
    out.append(name).append("=").append(proxy_url).append("\n");
  out.append("NO_PROXY=\nno_proxy=\nNODE_USE_ENV_PROXY=1\n");
  return out;
}

// Written whole under a temporary name and renamed, mode 0600: readers never see half a file.
void write_file_atomically(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp";
  const mode_t old_mask = ::umask(077);
  std::ofstream out(tmp, std::ios::trunc);
  ::umask(old_mask);
  out << content;
  out.close();
  if (!out) throw std::runtime_error("cannot write " + tmp);
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw std::runtime_error("cannot write " + path + ": " + ec.message());
}

nlohmann::ordered_json policy_sources(const config::policy_set& set) {
  auto list = nlohmann::ordered_json::array();
  for (const auto& layer : set.layers())
    list.push_back({{"source", layer.source}, {"sha256", layer.sha256}});
  return list;
}

int run_serve(const serve_options& o) {
  setup_logging(o.common.log_level);
  std::string host;
  std::uint16_t port = 0;
  if (!split_listen(o.listen, host, port)) {
    std::cerr << "broker: --listen " << o.listen << ": expected HOST:PORT\n";
    return exit_usage;
  }
  if (!o.session.empty() && !valid_session_name(o.session)) {
    std::cerr << "broker: --session " << o.session
              << ": use 1-64 letters, digits, '.', '_' or '-'\n";
    return exit_usage;
  }
  proxy::proxy_options options;
  std::shared_ptr<const config::policy_set> policy;
  try {
    options.connect_to = parse_connect_to_rules(o.common.connect_to);
    check_upstream_cas(o.common.upstream_cas);
    for (const auto& spec : o.timeouts) proxy::set_timeout(options.timeouts, spec);
    for (const auto& f : o.common.upstream_cas) options.upstream_cas.emplace_back(f);
    policy = std::make_shared<config::policy_set>(load_layers(o.common.policies));
  } catch (const std::exception& e) {
    std::cerr << "broker: " << e.what() << "\n";
    return exit_usage;
  }
  options.session_id = o.session.empty() ? session::new_session_id() : o.session;
  auto audit = session::audit_log::open(log_dir_or_default(o.common.log_dir), options.session_id);
  if (audit->failed())
    spdlog::error("[{}] audit log unavailable ({}): every request will be refused",
                  options.session_id, audit->failure());
  auto ctx = std::make_shared<proxy::proxy_context>(options, policy, std::move(audit));

  std::unique_ptr<proxy::server> server;
  try {
    server = std::make_unique<proxy::server>(ctx, host, port,
                                             std::max(2u, std::thread::hardware_concurrency()));
  } catch (const std::exception& e) {
    std::cerr << "broker: " << e.what() << "\n";
    return exit_failure;
  }
  const bool v6 = server->host().find(':') != std::string::npos;
  const std::string url = "http://" + (v6 ? "[" + server->host() + "]" : server->host()) + ":" +
                          std::to_string(server->port());
  ctx->audit_log().write({{"event", "session_start"},
                          {"version", BROKER_VERSION},
                          {"mode", "serve"},
                          {"listen", url},
                          {"policy", policy_sources(*policy)}});
  if (!o.env_file.empty()) {
    try {
      write_file_atomically(o.env_file, render_env_file(url));
    } catch (const std::exception& e) {
      std::cerr << "broker: --env-file: " << e.what() << "\n";
      return exit_failure;
    }
  }
  std::cout << "broker: listening on " << url << " session=" << options.session_id << std::endl;

  const auto files = o.common.policies;
  server->run([ctx, files] {
    // Validate first: a broken file never replaces a working policy.
    try {
      auto fresh = std::make_shared<config::policy_set>(load_layers(files));
      std::string digests;
      for (const auto& layer : fresh->layers()) digests += " " + layer.source + "=" + layer.sha256;
      ctx->audit_log().write({{"event", "policy_reload"}, {"policy", policy_sources(*fresh)}});
      ctx->replace_policy(std::move(fresh));
      spdlog::info("[{}] policy reloaded:{}", ctx->session_id(), digests);
    } catch (const std::exception& e) {
      spdlog::error("[{}] policy reload refused, keeping the current policy: {}", ctx->session_id(),
                    e.what());
    }
  });
  ctx->audit_log().write({{"event", "session_end"},
                          {"requests", ctx->requests()},
                          {"denied", ctx->denied()},
                          {"exit", nullptr}});
  spdlog::info("[{}] stopped after {} request(s), {} denied", ctx->session_id(), ctx->requests(),
               ctx->denied());
  return exit_ok;
}

}  // namespace

void register_serve(CLI::App& root, int& exit_status) {
  auto options = std::make_shared<serve_options>();
  auto* app = root.add_subcommand("serve", "Run one proxy session on a listening address");
  add_common_options(*app, options->common);
  app->add_option("--listen", options->listen, "HOST:PORT to listen on (port 0: any free port)")
      ->required();
  app->add_option("--session", options->session, "Session name (default: a random id)");
  app->add_option("--env-file", options->env_file,
                  "Write the child environment (KEY=VALUE lines) to this file");
  app->add_option("--timeout", options->timeouts,
                  "NAME=DURATION: head, idle, dns, connect, upstream, body, tunnel, drain");
  app->callback([options, &exit_status] { exit_status = run_serve(*options); });
}

}  // namespace broker::cli
