// `broker wrap -- CMD`: one session around one command (DESIGN §3, §8). The command gets dummy
// credentials and the session's proxy and trust variables; with netns isolation its only way
// out is the proxy, served here from a listener made inside its network namespace.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>
#include <algorithm>

#include <cstdlib>
#include <iostream>
#include <optional>
#include <thread>

#include "base/atomic_file.hpp"
#include "certs/ca.hpp"
#include "certs/leaf_cache.hpp"
#include "certs/trust_bundle.hpp"
#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "proxy/server.hpp"
#include "proxy/session_setup.hpp"
#include "proxy/sock_diag.hpp"
#include "proxy/synthetic_addresses.hpp"
#include "proxy/tls.hpp"
#include "session/audit_record.hpp"
#include "session/child_env.hpp"
#include "session/control_socket.hpp"
#include "session/log.hpp"
#include "session/session_dir.hpp"
#include "wrap/capture_net.hpp"
#include "wrap/child_session.hpp"
#include "wrap/directory_view.hpp"
#include "wrap/env_policy.hpp"
#include "wrap/file_masks.hpp"
#include "wrap/git_dirs.hpp"
#include "wrap/home_guard.hpp"
#include "wrap/private_dirs.hpp"
#include "wrap/sandbox_init.hpp"
#include "wrap/session_views.hpp"

extern char** environ;

namespace broker::cli {

namespace {

// `wrap` exits with the command's status; these are its own (DESIGN §3).
constexpr int exit_broker_failed = 125;
// Inside the child's fresh network namespace every port is free; the proxy takes this one, and
// the transparent capture's listener the next (DESIGN §11).
constexpr std::uint16_t netns_proxy_port = 3128;
constexpr std::uint16_t netns_capture_port = 3129;
// The child's resolver with capture: the broker's DNS on its own loopback; and a hosts file
// with loopback names only, so that every other name is the broker's to answer (the host's
// entries would name addresses the child cannot reach, or go around the policy's names).
constexpr const char* capture_resolv_conf =
    "# broker: the session's DNS, answered by the broker itself\nnameserver 127.0.0.1\n";
std::string capture_hosts_file() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  std::string text =
      "# broker: loopback names only; every other name is the broker's DNS to answer\n"
      "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n";
  if (name[0] && std::string_view(name) != "localhost")
    text += "127.0.1.1\t" + std::string(name) + "\n";
  return text;
}

struct wrap_options {
  common_options common;
  std::string session;
  std::string isolate = "auto";
  std::string env_file;
  std::vector<std::string> timeouts;
  std::vector<std::string> command;
};

std::vector<session::variable> parent_environment() {
  std::vector<session::variable> out;
  for (char** e = environ; *e; ++e) {
    const std::string_view entry(*e);
    const auto eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    out.emplace_back(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
  }
  return out;
}

// Which isolation this run gets; throws for an explicit netns that cannot be had.
wrap::isolation choose_isolation(const std::string& requested) {
  if (requested == "env") return wrap::isolation::env;
  const std::string why = wrap::netns_unavailable_reason();
  if (why.empty()) return wrap::isolation::netns;
  if (requested == "netns") throw std::runtime_error("--isolate netns: " + why);
  std::cerr << "broker: WARNING: network isolation is unavailable (" << why
            << "); running with --isolate env: only the proxy variables keep the command "
               "inside the session, a program that ignores them is not stopped\n";
  return wrap::isolation::env;
}

// Runs until the command ends, passing signals on; returns its exit status. A spent budget that
// ends the session (on_exhaust kill, or duration) kills the command's whole tree, and says so.
int supervise(wrap::child_session& child, const sigset_t& signals, proxy::proxy_context& ctx) {
  bool killed = false;
  for (;;) {
    siginfo_t info{};
    const timespec tick{0, 200 * 1000 * 1000};
    const int signo = ::sigtimedwait(&signals, &info, &tick);
    if (signo == SIGCHLD || (killed && signo < 0)) {
      const int code = child.poll();
      if (code >= 0) return code;
    } else if (signo > 0) {
      child.forward(signo);
    }
    if (killed) continue;
    auto ended = ctx.session_ender();
    if (!ended) {
      if (auto spent = ctx.budget()->spent(std::chrono::steady_clock::now()); spent && spent->kill)
        ended = proxy::session_end{proxy::session_end::cause::budget, *spent};
    }
    if (ended) {
      const session::exhausted& spent = ended->spent;
      if (ended->why == proxy::session_end::cause::kill)
        std::cerr << "broker: session " << ctx.session_id() << " ended by broker kill\n";
      else
        std::cerr << "broker: session " << ctx.session_id() << " ended: the " << spent.budget
                  << " budget is spent (limit " << spent.limit << ", used " << spent.used << ")\n";
      child.kill_all();
      killed = true;
    }
  }
}

// The child's private /tmp, /run and the like (DESIGN §8.1), with what the command needs from
// under them kept: its working directory, $HOME, its executable, the session files it reads and
// files.pass.
std::vector<wrap::view_step> private_view(const wrap::env_plan& plan, const std::string& cwd,
                                          const std::string& home,
                                          const std::vector<config::policy>& layers,
                                          std::vector<std::string> kept,
                                          const std::string& command) {
  std::string path_variable;
  for (const auto& [name, value] : plan.env)
    if (name == "PATH") path_variable = value;
  kept.push_back(cwd);
  kept.push_back(home);
  kept.push_back(wrap::find_command(command, path_variable, cwd));
  for (auto& path : wrap::passed_paths(layers, home)) kept.push_back(std::move(path));
  const char* runtime = std::getenv("XDG_RUNTIME_DIR");
  auto dirs = wrap::host_ipc_dirs(runtime ? runtime : "");
  // Where sessions' control sockets live is the broker's own state: empty even under a /tmp the
  // working directory keeps.
  dirs.push_back({wrap::view_step::empty, session::runtime_base().string(), 0700});
  return wrap::private_view(dirs, kept);
}

// One stderr block naming each path kept out of the host, and one audit record each (DESIGN
// §8.1); nothing when nothing was. What an agent makes again every session (its programs,
// removed) is named on one line, and its key store only when it changed.
void report_kept_out(const std::vector<wrap::kept_out>& kept, const std::string& session_id,
                     session::audit_log& audit) {
  bool set_aside = false;
  std::string removed;
  for (const auto& k : kept) {
    audit.write(session::kept_out_record(k.path, k.reason, k.kept));
    if (k.kept.empty()) {
      removed += (removed.empty() ? "" : ", ") + k.path;
    } else if (!k.stored || k.store_changed) {
      std::cerr << "broker: kept out of your home: " << k.path << " (" << k.reason << ") -> "
                << k.kept << "\n";
      set_aside |= !k.stored;
    }
  }
  if (!removed.empty())
    std::cerr << "broker: removed what the command made for later outside the session (an "
                 "agent's own programs and their state, made again next session): "
              << removed << "\n";
  if (set_aside) std::cerr << "broker: to take one anyway: broker keep " << session_id << " PATH\n";
}

std::string env_value(const wrap::env_plan& plan, std::string_view name) {
  for (const auto& [n, value] : plan.env)
    if (n == name) return value;
  return {};
}

void take_back_terminal() {
  if (!::isatty(STDIN_FILENO) || ::tcgetpgrp(STDIN_FILENO) == ::getpgrp()) return;
  ::signal(SIGTTOU, SIG_IGN);
  ::tcsetpgrp(STDIN_FILENO, ::getpgrp());
  ::signal(SIGTTOU, SIG_DFL);
}

int run_wrap(wrap_options& o) {
  setup_logging(o.common.log_level);
  // The signals the command gets are blocked from here on in every thread; this one takes them.
  sigset_t signals = wrap::forwarded_signals();
  sigaddset(&signals, SIGCHLD);
  ::pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  session_setup setup;
  wrap::isolation mode;
  std::shared_ptr<certs::certificate_authority> ca;
  std::shared_ptr<proxy::tls_contexts> tls;
  std::unique_ptr<session::session_dir> dir;
  try {
    setup = load_options_and_policy(o.common, o.timeouts, o.session);
    mode = choose_isolation(o.isolate);
    // Only a netns child can be shown dummy copies of the agents' login files (DESIGN §9).
    // Dummies stable from one session to the next (DESIGN §5): an agent's memory of its key holds.
    load_credentials(setup, mode == wrap::isolation::netns, true);
    // The session CA lives in this process's memory only (DESIGN §8).
    ca = std::make_shared<certs::certificate_authority>(certs::certificate_authority::generate(
        "broker session CA " + setup.options.session_id, 30));
    tls = std::make_shared<proxy::tls_contexts>(std::make_shared<certs::leaf_cache>(*ca),
                                                setup.options.upstream_cas);
    dir = std::make_unique<session::session_dir>(setup.options.session_id);
    certs::write_trust_bundle(dir->bundle(), *ca, base::durability::session);
  } catch (const std::exception& e) {
    std::cerr << "broker: " << e.what() << "\n";
    return exit_broker_failed;
  }
  const auto& session_id = setup.options.session_id;

  std::uint16_t port = netns_proxy_port;
  int listener = -1;
  std::unique_ptr<wrap::child_session> child;
  std::unique_ptr<session::audit_log> audit;
  std::vector<wrap::directory_view> views;  // copied back at the end, parents first
  std::optional<wrap::home_guard> guard;    // what may not go back from them
  wrap::child_session::capture_sockets capture;
  // Login files' directory views live beside the session's log (on disk, hidden from the
  // child with the log directory, usually on the home's file system so that what goes back is
  // a rename); what is kept out of the host is set aside there too.
  const auto log_dir = log_dir_or_default(o.common.log_dir);
  const auto views_dir = wrap::views_place(log_dir, session_id);
  wrap::copy_budget copy_in = wrap::copy_budget::starting_now();
  std::string home, cwd;
  timespec child_started{};  // what the session changed is what changed after this
  try {
    // The audit log's directory exists before the child does, so that it can be hidden.
    audit = open_audit(o.common, session_id);
    if (mode == wrap::isolation::env) listener = loopback_listener(port);
    const std::string url = "http://127.0.0.1:" + std::to_string(port);
    std::vector<wrap::brokered_var> dummies;
    for (auto& v : setup.credentials->dummy_variables())
      dummies.push_back({std::move(v.name), std::move(v.value), std::move(v.credential)});
    // What the child reads from the session directory, which is itself hidden from it.
    std::vector<std::string> session_files{dir->bundle().string()};
    std::vector<wrap::launch_options::overlay> overlays;
    std::vector<std::pair<std::string, std::string>> login_files;  // path, credential
    for (const auto& f : setup.credentials->dummy_files()) {
      // A gcp child's key file (a dummy OAuth client), or a login file's dummy copy shown at
      // the file's own path: in the session directory.
      const auto file = dir->path() / f.file_name;
      if (!f.target.empty()) login_files.emplace_back(f.target, f.credential);
      if (f.directory_view) {
        std::filesystem::create_directories(views_dir);
        const std::filesystem::path target(f.target);
        views.push_back(wrap::make_directory_view({target.parent_path().string(),
                                                   (views_dir / f.credential).string(),
                                                   target.filename().string(),
                                                   f.content,
                                                   {},
                                                   false},
                                                  copy_in));
        continue;
      }
      base::write_file_atomically(file, f.content, 0600, base::durability::session);
      if (!f.target.empty()) {
        overlays.push_back({file.string(), f.target});
        continue;
      }
      dummies.push_back({f.variable, file.string(), f.credential});
      session_files.push_back(file.string());
    }
    const auto session_vars = session::child_environment(url, dir->bundle().string(), {});
    auto rules = wrap::merge_env_rules(setup.policy->layers());
    for (auto& name : setup.credentials->displaced_variables()) rules.strip.push_back(name);
    const auto plan =
        wrap::plan_child_environment(parent_environment(), dummies, session_vars, rules);
    std::cerr << wrap::describe(session_id, plan,
                                mode == wrap::isolation::netns
                                    ? "netns, transparent capture"
                                    : "env (no isolation; no transparent capture: a program "
                                      "that ignores the proxy variables is not captured)",
                                login_files)
              << "\n";
    if (!o.env_file.empty()) dir->write_env_file(o.env_file, session::render_env_lines(plan.env));

    wrap::launch_options launch;
    launch.argv = o.command;
    for (const auto& [name, value] : plan.env) launch.envp.push_back(name + "=" + value);
    launch.mode = mode;
    launch.proxy_port = port;
    if (mode == wrap::isolation::netns) {
      launch.capture = true;
      launch.capture_port = netns_capture_port;
      for (const auto& [file, text] :
           {std::pair<std::string, std::string>{"resolv.conf", capture_resolv_conf},
            {"hosts", capture_hosts_file()}}) {
        const auto copy = dir->path() / file;
        base::write_file_atomically(copy, text, 0644, base::durability::session);
        launch.etc_files.emplace_back(copy.string(), "/etc/" + file);
      }
    }
    const char* home_variable = std::getenv("HOME");
    home = home_variable ? home_variable : "";
    std::error_code ec;
    cwd = std::filesystem::current_path(ec).string();
    launch.private_view =
        private_view(plan, cwd, home, setup.policy->layers(), session_files, o.command.front());
    launch.overlays = overlays;
    launch.masks = wrap::credential_file_masks(setup.policy->layers(), home);
    launch.read_only = wrap::read_only_files(setup.policy->layers(), home);
    launch.scratch = wrap::scratch_directories(setup.policy->layers(), home);
    for (auto& path : wrap::protected_git_paths(cwd)) launch.read_only.push_back(std::move(path));
    std::vector<std::string> unhidden;
    for (auto& m : wrap::broker_state_masks(setup.policy->layers(),
                                            log_dir_or_default(o.common.log_dir).string(), home,
                                            cwd, &unhidden))
      launch.masks.push_back(std::move(m));
    // A login file's copy is what the child sees there: no mask covers it (gh's hosts.yml is
    // under a masked ~/.config/gh).
    std::erase_if(launch.masks, [&](const std::string& mask) {
      return std::any_of(login_files.begin(), login_files.end(), [&](const auto& f) {
        return f.first == mask || f.first.starts_with(mask + "/");
      });
    });
    if (mode == wrap::isolation::netns) {
      guard.emplace(wrap::persistence_paths(setup.policy->layers(), home), home,
                    env_value(plan, "PATH"));
      for (const auto& w : wrap::add_guard_views(*guard, cwd, launch, views, views_dir, copy_in))
        std::cerr << "broker: warning: " << w << "\n";
    }
    launch.views = views;
    if (mode == wrap::isolation::netns)
      for (const auto& path : unhidden)
        std::cerr << "broker: warning: " << path
                  << " holds the working directory, so the command can read and change it\n";
    ::clock_gettime(CLOCK_REALTIME, &child_started);
    child = std::make_unique<wrap::child_session>(launch);
    if (mode == wrap::isolation::netns) {
      listener = child->take_listener();
      capture = child->take_capture();
      if (capture.listener < 0)
        std::cerr << "broker: warning: transparent capture is unavailable (" << capture.unavailable
                  << "): a program that ignores the proxy variables cannot connect\n";
    }
  } catch (const std::exception& e) {
    std::cerr << "broker: " << e.what() << "\n";
    if (listener >= 0) ::close(listener);
    return exit_broker_failed;
  }

  auto ctx = std::make_shared<proxy::proxy_context>(setup.options, setup.policy, std::move(audit),
                                                    setup.credentials, tls);
  ctx->set_client_process(mode == wrap::isolation::netns ? child->pid() : 0, child->pid());
  // The connection's socket is looked up in the namespace the client lives in: the child's
  // (a socket made there by its init) or, in env mode, this one.
  ctx->set_client_sock_diag(mode == wrap::isolation::netns
                                ? proxy::sock_diag::adopt(child->take_sock_diag())
                                : proxy::sock_diag::open());
  ctx->set_budget(setup.budget);
  session::session_start start;
  start.mode = "wrap";
  start.isolation = mode == wrap::isolation::netns ? "netns" : "env";
  start.capture = capture.listener >= 0;
  start.command = o.command.front();
  start.pid = child->pid();
  start.credentials = setup.credentials->names();
  ctx->audit_log().write(session::start_record(start));
  std::unique_ptr<session::control_socket> control;
  try {
    control = std::make_unique<session::control_socket>(
        dir->control_socket(), [&] { return session_status(*ctx, "wrap", child->pid()); },
        [&] {
          ctx->end_session({proxy::session_end::cause::kill, {}});
        });
  } catch (const std::exception& e) {
    session::log(spdlog::level::warn, session::log_tag(session_id), "no control socket: {}",
                 e.what());
  }
  auto server = std::make_unique<proxy::server>(ctx, listener, 2);
  if (capture.listener >= 0) {
    config::ip_address v6_base;
    v6_base.v4 = false;
    std::copy(std::begin(wrap::synthetic_ipv6_net.s6_addr),
              std::end(wrap::synthetic_ipv6_net.s6_addr), v6_base.bytes.begin());
    ctx->set_synthetic_names(std::make_shared<proxy::synthetic_addresses>(
        config::ip_address::from_v4(wrap::synthetic_ipv4_net), v6_base));
    server->add_capture(capture.listener, capture.dns_udp, capture.dns_tcp);
  }
  std::thread serving([&server] { server->run(nullptr); });

  const int code = supervise(*child, signals, *ctx);
  child->end_leftovers();
  take_back_terminal();
  const auto kept_root = log_dir / (session_id + ".kept");
  auto back = wrap::return_views(views, views_dir, kept_root, guard ? &*guard : nullptr);
  for (const auto& path : back.copied)
    session::log(spdlog::level::info, session::log_tag(session_id), "{} copied back", path);
  if (mode == wrap::isolation::netns)
    wrap::keep_out_git_leftovers(cwd, home, child_started, log_dir, kept_root, back);
  for (const auto& w : back.warnings) std::cerr << "broker: warning: " << w << "\n";
  server->stop();
  serving.join();
  report_kept_out(back.kept, session_id, ctx->audit_log());
  ctx->audit_log().end(session::end_record(session_end_of(*ctx, code)));
  if (ctx->audit_log().replaced())
    std::cerr << "broker: warning: " << ctx->audit_log().path().string()
              << " was replaced or removed during the session; the file there now is not the "
                 "session's log\n";
  return code;
}

}  // namespace

void register_wrap(CLI::App& root, int& exit_status) {
  auto options = std::make_shared<wrap_options>();
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
  app->add_option("command", options->command, "The command and its arguments, after --")
      ->required();
  app->callback([options, &exit_status] { exit_status = run_wrap(*options); });
}

}  // namespace broker::cli
