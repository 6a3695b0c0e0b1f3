// `broker wrap -- CMD` assembled and run (run.hpp): the session started, the command's files,
// environment and view prepared, the command launched, the proxy served, and what the session
// changed taken back at the end; each a step below, in that order.
#include "wrap/run.hpp"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <thread>

#include "base/atomic_file.hpp"
#include "base/loopback_socket.hpp"
#include "capture/sock_diag.hpp"
#include "capture/synthetic_addresses.hpp"
#include "certs/ca.hpp"
#include "certs/leaf_cache.hpp"
#include "certs/tls_contexts.hpp"
#include "certs/trust_bundle.hpp"
#include "config/program_identity.hpp"
#include "live/ask_desk.hpp"
#include "live/session_setup.hpp"
#include "live/session_status.hpp"
#include "proxy/server.hpp"
#include "sandbox/capture_net.hpp"
#include "sandbox/child_session.hpp"
#include "sandbox/env_policy.hpp"
#include "sandbox/private_dirs.hpp"
#include "sandbox/program_check.hpp"
#include "sandbox/sandbox_init.hpp"
#include "sandbox/session_files.hpp"
#include "sandbox/workspace_origin.hpp"
#include "session/audit_record.hpp"
#include "session/child_env.hpp"
#include "session/control_socket.hpp"
#include "session/log.hpp"
#include "session/session_dir.hpp"
#include "ssh/agent_filter.hpp"
#include "wrap/ask_notice.hpp"
#include "wrap/ssh_setup.hpp"

extern char** environ;

namespace broker::wrap {

namespace {

// Inside the child's fresh network namespace every port is free; the proxy takes this one, and
// the transparent capture's listener the next (docs/architecture.md).
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

// Runs until the command ends, passing signals on; returns its exit status. A spent budget that
// ends the session (on_exhaust kill, or duration) kills the command's whole tree, and says so.
int supervise(sandbox::child_session& child, const sigset_t& signals, live::live_session& ctx) {
  bool killed = false;
  for (;;) {
    siginfo_t info{};
    const timespec tick{0, 200 * 1000 * 1000};
    const int signo = ::sigtimedwait(&signals, &info, &tick);
    if (signo == SIGIO) {
      // netns: init's word that the command and all it left have ended, before its own end.
      if (const int code = child.take_end_report(); code >= 0) return code;
    } else if (signo == SIGCHLD || (killed && signo < 0)) {
      const int code = child.poll();
      if (code >= 0) return code;
    } else if (signo > 0) {
      child.forward(signo);
    }
    if (killed) continue;
    auto ended = ctx.ending().asked();
    if (!ended) {
      if (auto spent = ctx.budget()->spent(std::chrono::steady_clock::now()); spent && spent->kill)
        ended = live::session_end{live::session_end::cause::budget, *spent};
    }
    if (ended) {
      const session::exhausted& spent = ended->spent;
      if (ended->why == live::session_end::cause::kill)
        std::cerr << "broker: session " << ctx.session_id() << " ended by broker kill\n";
      else
        std::cerr << "broker: session " << ctx.session_id() << " ended: the " << spent.budget
                  << " budget is spent (limit " << spent.limit << ", used " << spent.used << ")\n";
      child.kill_all();
      killed = true;
    }
  }
}

std::string env_value(const sandbox::env_plan& plan, std::string_view name) {
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

// The parts of a running wrap session, each made by one step below. Declared in the order they
// are made, so they end in the reverse order.
struct wrapping {
  explicit wrapping(const wrap_config& config) : c(config) {}
  const wrap_config& c;
  sigset_t signals{};
  live::session_setup setup;
  sandbox::isolation mode = sandbox::isolation::env;
  std::uint16_t port = netns_proxy_port;
  int listener = -1;
  // netns: made first, launched once all is prepared
  std::unique_ptr<sandbox::child_session> child;
  sandbox::child_session::capture_sockets capture;
  std::shared_ptr<certs::certificate_authority> ca;
  std::shared_ptr<certs::tls_contexts> tls;
  std::unique_ptr<session::session_dir> dir;
  std::filesystem::path log_dir;
  std::unique_ptr<session::audit_log> audit;
  std::unique_ptr<sandbox::session_files> files;  // what the command sees, and judged at the end
  ssh_setup ssh;  // with ssh rules: the session's agent and the socket to it
  std::string home, cwd;
  std::shared_ptr<live::live_session> ctx;
  std::unique_ptr<session::control_socket> control;
  std::unique_ptr<proxy::server> server;
  std::unique_ptr<ssh::agent_filter> ssh_filter;
  bool netns() const { return mode == sandbox::isolation::netns; }
  const std::string& session_id() const { return setup.options.session_id; }
};

// What the command reads of the session: dummies as variables, files in the session directory,
// login files' dummy copies, and what it must be able to read.
struct child_files {
  std::vector<sandbox::brokered_var> dummies;
  std::vector<std::string> session_files;
  std::vector<std::pair<std::string, std::string>> login_copies;  // the copy, its target
  std::vector<std::pair<std::string, std::string>> login_files;   // path, credential
};

// The isolation this run gets: in netns mode the namespaces and their init, made before the rest
// of the session (child_session.hpp); throws for an explicit netns that cannot be had.
void start_child(wrapping& w) {
  sandbox::launch_options network;
  if (w.c.isolate != "env") {
    network.mode = sandbox::isolation::netns;
    network.proxy_port = netns_proxy_port;
    network.capture = true;
    network.capture_port = netns_capture_port;
    try {
      w.child = std::make_unique<sandbox::child_session>(network);
      w.mode = sandbox::isolation::netns;
      return;
    } catch (const sandbox::namespaces_unavailable& e) {
      if (w.c.isolate == "netns")
        throw std::runtime_error(std::string("--isolate netns: ") + e.what());
      std::cerr << "broker: WARNING: network isolation is unavailable (" << e.what()
                << "); running with --isolate env: only the proxy variables keep the command "
                   "inside the session, a program that ignores them is not stopped\n";
    }
  }
  network = sandbox::launch_options{};
  network.mode = w.mode = sandbox::isolation::env;
  w.child = std::make_unique<sandbox::child_session>(network);
}

// Every --workspace, absolute.
std::vector<std::string> asked_workspaces(const wrap_config& c) {
  std::vector<std::string> out;
  for (const auto& dir : c.workspaces) {
    std::error_code ec;
    out.push_back(std::filesystem::absolute(dir, ec).lexically_normal().string());
  }
  return out;
}

// A policy whose "programs" this session could defeat is refused, each one named (docs/policy.md).
void check_programs(const wrapping& w) {
  sandbox::home_rule_inputs in;
  in.home = w.home;
  in.env = parent_environment();
  in.layers = w.setup.policy->layers();
  in.root = ::geteuid() == 0;
  auto workspaces = asked_workspaces(w.c);
  workspaces.push_back(w.cwd);
  std::string refused;
  for (const auto& p :
       sandbox::program_problems(in.layers, sandbox::session_write_places(in, workspaces)))
    refused += (refused.empty() ? "" : "\nbroker: ") + p.text();
  if (!refused.empty()) throw std::runtime_error(refused);
}

// --scope-to-workspace: one more layer, which narrows the github credentials to the origin.
void scope_to_workspace(wrapping& w) {
  sandbox::github_remote origin;
  try {
    origin = sandbox::workspace_origin(w.cwd);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string("--scope-to-workspace: ") + e.what());
  }
  auto layers = w.setup.policy->layers();
  try {
    layers.push_back(sandbox::scope_to_origin_layer(layers, origin));
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string("--scope-to-workspace: ") + e.what());
  }
  w.setup.policy = std::make_shared<config::policy_set>(std::move(layers));
  session::log(spdlog::level::info, session::log_tag(w.session_id()),
               "github credentials scoped to {}/{}", origin.host, origin.repo.text());
}

// The options, policy and credentials, the isolation, the session CA and directory.
void start_session(wrapping& w) {
  w.setup =
      live::load_options_and_policy(w.c.common, w.c.timeouts, w.c.session, w.c.ask || w.c.learn);
  const char* home_variable = std::getenv("HOME");
  w.home = home_variable ? home_variable : "";
  std::error_code ec;
  w.cwd = std::filesystem::current_path(ec).string();
  if (w.c.scope_to_workspace) scope_to_workspace(w);
  w.setup.policy = with_ssh_origin(w.setup.policy, w.home, w.cwd);
  check_programs(w);
  start_child(w);
  // Only a netns child can be shown dummy copies of the agents' login files (docs/agents.md).
  // Dummies stable from one session to the next (docs/policy.md): an agent's memory of its key
  // holds.
  live::load_credentials(w.setup, w.netns(), true);
  // The session CA lives in this process's memory only (docs/security-model.md).
  w.ca = std::make_shared<certs::certificate_authority>(
      certs::certificate_authority::generate("broker session CA " + w.session_id(), 30));
  w.tls = std::make_shared<certs::tls_contexts>(std::make_shared<certs::leaf_cache>(*w.ca),
                                                w.setup.options.upstream_cas);
  w.dir = std::make_unique<session::session_dir>(w.session_id());
  certs::write_trust_bundle(w.dir->bundle(), *w.ca, base::durability::session);
  // What is kept out of the host is set aside beside the session's log (hidden from the child).
  w.log_dir = live::log_dir_or_default(w.c.common.log_dir);
}

child_files write_child_files(wrapping& w) {
  child_files out;
  if (!w.ssh.socket.empty()) out.session_files.push_back(w.ssh.socket);
  if (!w.ssh.known_hosts.empty()) out.session_files.push_back(w.ssh.known_hosts);
  for (auto& v : w.setup.credentials->dummy_variables())
    out.dummies.push_back({std::move(v.name), std::move(v.value), std::move(v.credential)});
  // What the child reads from the session directory, which is itself hidden from it.
  out.session_files.push_back(w.dir->bundle().string());
  for (const auto& f : w.setup.credentials->dummy_files()) {
    // A gcp child's key file (a dummy OAuth client), or a login file's dummy copy shown at the
    // file's own path: in the session directory.
    const auto file = w.dir->path() / f.file_name;
    base::write_file_atomically(file, f.content, 0600, base::durability::session);
    if (!f.target.empty()) {
      out.login_files.emplace_back(f.target, f.credential);
      out.login_copies.emplace_back(file.string(), f.target);
      continue;
    }
    out.dummies.push_back({f.variable, file.string(), f.credential});
    out.session_files.push_back(file.string());
  }
  return out;
}

// The command's environment: the parent's, less what the policy strips, with the dummies and
// the session's proxy variables; told on stderr, and written to --env-file.
sandbox::env_plan plan_environment(wrapping& w, const child_files& files) {
  const std::string url = "http://127.0.0.1:" + std::to_string(w.port);
  auto session_vars = session::child_environment(url, w.dir->bundle().string(), {});
  if (!w.ssh.socket.empty()) session_vars.emplace_back("SSH_AUTH_SOCK", w.ssh.socket);
  auto rules = sandbox::merge_env_rules(w.setup.policy->layers());
  for (auto& name : w.setup.credentials->displaced_variables()) rules.strip.push_back(name);
  auto plan =
      sandbox::plan_child_environment(parent_environment(), files.dummies, session_vars, rules);
  std::cerr << sandbox::describe(w.session_id(), plan,
                                 w.netns() ? "netns, transparent capture"
                                           : "env (no isolation; no transparent capture: a program "
                                             "that ignores the proxy variables is not captured)",
                                 files.login_files)
            << "\n";
  if (!w.c.env_file.empty())
    w.dir->write_env_file(w.c.env_file, session::render_env_lines(plan.env));
  return plan;
}

// With capture, the child's resolver and hosts file, from the session directory.
void add_capture_files(wrapping& w, sandbox::launch_options& launch) {
  launch.capture = true;
  launch.capture_port = netns_capture_port;
  for (const auto& [file, text] :
       {std::pair<std::string, std::string>{"resolv.conf", capture_resolv_conf},
        {"hosts", capture_hosts_file()}}) {
    const auto copy = w.dir->path() / file;
    base::write_file_atomically(copy, text, 0644, base::durability::session);
    launch.etc_files.emplace_back(copy.string(), "/etc/" + file);
  }
}

// What the command sees of the file system (session_files.hpp).
void add_file_system(wrapping& w, const sandbox::env_plan& plan, const child_files& files,
                     sandbox::launch_options& launch) {
  sandbox::session_files_inputs in;
  in.layers = &w.setup.policy->layers();
  in.home = w.home;
  in.cwd = w.cwd;
  in.log_dir = w.log_dir.string();
  in.workspaces = asked_workspaces(w.c);
  in.env = parent_environment();
  in.kept = files.session_files;
  in.kept.push_back(sandbox::find_command(w.c.command.front(), env_value(plan, "PATH"), w.cwd));
  in.login_copies = files.login_copies;
  in.netns = w.netns();
  std::vector<std::string> warnings;
  w.files = std::make_unique<sandbox::session_files>(in, launch, warnings);
  for (const auto& warning : warnings) std::cerr << "broker: warning: " << warning << "\n";
}

// The command started in its sandbox, with the proxy's listener (and capture's) made inside it.
void launch_child(wrapping& w) {
  // The audit log's directory exists before the child does, so that it can be hidden.
  w.audit = live::open_audit(w.c.common, w.session_id());
  if (!w.netns()) w.listener = base::loopback_listener(w.port);
  w.ssh = start_ssh(*w.setup.policy, w.home, w.dir->path(), w.netns());
  const auto files = write_child_files(w);
  const auto plan = plan_environment(w, files);
  sandbox::launch_options launch;
  launch.argv = w.c.command;
  for (const auto& [name, value] : plan.env) launch.envp.push_back(name + "=" + value);
  launch.mode = w.mode;
  launch.proxy_port = w.port;
  if (w.netns()) add_capture_files(w, launch);
  add_file_system(w, plan, files, launch);
  if (w.netns() && w.ssh.agent) add_ssh_files(w.ssh, w.home, w.dir->path(), launch);
  w.child->launch(launch);
  if (!w.netns()) return;
  // The command's view holds the socket now (bound in); the host's path goes, so that nothing of
  // it is left behind whatever ends the broker.
  if (!w.ssh.socket.empty()) ::unlink(w.ssh.socket.c_str());
  std::vector<std::string> warnings;
  w.files->launched(*w.child, warnings);
  for (const auto& warning : warnings) std::cerr << "broker: warning: " << warning << "\n";
  w.listener = w.child->take_listener();
  w.capture = w.child->take_capture();
  if (w.capture.listener < 0)
    std::cerr << "broker: warning: transparent capture is unavailable (" << w.capture.unavailable
              << "): a program that ignores the proxy variables cannot connect\n";
}

// The proxy's context for the command's process tree, the session's first record, the control
// socket, and the server (with capture's listeners and DNS).
void start_proxy(wrapping& w) {
  auto& child = *w.child;
  live::session_attachments attached;
  attached.budget = w.setup.budget;
  attached.clients.netns_pid = w.netns() ? child.pid() : 0;
  attached.clients.root_pid = child.pid();
  // The connection's socket is looked up in the namespace the client lives in: the child's (a
  // socket made there by its init) or, in env mode, this one.
  attached.clients.sock_diag =
      w.netns() ? capture::sock_diag::adopt(child.take_sock_diag()) : capture::sock_diag::open();
  // What the session can change of this process's view proves nothing about a program
  // (docs/policy.md): in netns only the places its writes go through to, else all the user can
  // write.
  attached.clients.writes = w.netns() ? config::session_writes::through(w.files->written_through())
                                      : config::session_writes::user();
  if (w.capture.listener >= 0) {
    config::ip_address v6_base;
    v6_base.v4 = false;
    std::copy(std::begin(sandbox::synthetic_ipv6_net.s6_addr),
              std::end(sandbox::synthetic_ipv6_net.s6_addr), v6_base.bytes.begin());
    attached.clients.synthetic_names = std::make_shared<capture::synthetic_addresses>(
        config::ip_address::from_v4(sandbox::synthetic_ipv4_net), v6_base);
  }
  attached.learn = w.c.learn;
  if (w.setup.asks && !w.c.learn) {
    auto asks = std::make_shared<live::ask_options>();
    asks->approved_file = w.setup.approved_file;
    asks->on_ask = [notify = w.c.ask_notify](const nlohmann::ordered_json& ask) {
      announce_ask(ask, notify);
    };
    attached.asks = std::move(asks);
  }
  w.ctx = std::make_shared<live::live_session>(w.setup.options, w.setup.policy, std::move(w.audit),
                                               w.setup.credentials, w.tls, std::move(attached));
  auto& ctx = *w.ctx;
  session::session_start start;
  start.mode = "wrap";
  start.isolation = w.netns() ? "netns" : "env";
  start.capture = w.capture.listener >= 0;
  start.command = w.c.command.front();
  start.pid = child.pid();
  start.credentials = w.setup.credentials->names();
  ctx.audit_log().write(session::start_record(start));
  try {
    w.control = std::make_unique<session::control_socket>(
        w.dir->control_socket(), [&] { return live::session_status(ctx, "wrap", child.pid()); },
        [&] {
          ctx.ending().ask({live::session_end::cause::kill, {}});
        },
        [&ctx](const std::string& line, const std::string& who) {
          return live::answer_ask_command(ctx.asks(), line, who);
        });
  } catch (const std::exception& e) {
    session::log(spdlog::level::warn, session::log_tag(w.session_id()), "no control socket: {}",
                 e.what());
  }
  w.server = std::make_unique<proxy::server>(w.ctx, w.listener, 2);
  if (w.ssh.listener >= 0)
    w.ssh_filter = std::make_unique<ssh::agent_filter>(
        std::exchange(w.ssh.listener, -1), w.ssh.agent->socket(),
        static_cast<std::uint32_t>(w.ssh.agent->keys().size()), w.ctx);
  if (w.capture.listener >= 0)
    w.server->add_capture(w.capture.listener, w.capture.dns_udp, w.capture.dns_tcp);
}

// After the command: its leftovers ended, what it changed taken in or kept out, the proxy
// stopped, and the session's last records.
void end_session(wrapping& w, std::thread& serving, int code) {
  w.child->end_leftovers();
  take_back_terminal();
  const auto kept_root = w.log_dir / (w.session_id() + ".kept");
  std::vector<std::string> warnings;
  const auto kept = w.files->end(kept_root.string(), warnings);
  for (const auto& warning : warnings) std::cerr << "broker: warning: " << warning << "\n";
  // The command and everything it started have ended: no client is left to answer. An exchange
  // still waiting on its upstream (an MCP server's or any event stream) gets a second for its
  // record to say how it ended, not the drain a server gives clients that are still there.
  w.server->stop(std::min<std::chrono::steady_clock::duration>(w.ctx->options().timeouts.drain,
                                                               std::chrono::seconds(1)));
  serving.join();
  w.ssh_filter.reset();
  w.ssh.agent.reset();
  auto& audit = w.ctx->audit_log();
  sandbox::report_kept_out(kept, w.session_id(), audit);
  audit.end(session::end_record(live::session_end_of(*w.ctx, code)));
  if (w.c.learn)
    std::cerr << "broker: learned " << w.ctx->counters().learned()
              << " requests the policy refused; a layer that allows what the session did: "
                 "broker policy suggest "
              << w.session_id() << "\n";
  if (audit.replaced())
    std::cerr << "broker: warning: " << audit.path().string()
              << " was replaced or removed during the session; the file there now is not the "
                 "session's log\n";
}

}  // namespace

int run(const wrap_config& c) {
  wrapping w(c);
  // The signals the command gets are blocked from here on in every thread; this one takes them.
  w.signals = sandbox::forwarded_signals();
  sigaddset(&w.signals, SIGCHLD);
  sigaddset(&w.signals, SIGIO);  // init's end report (child_session::take_end_report)
  ::pthread_sigmask(SIG_BLOCK, &w.signals, nullptr);
  try {
    start_session(w);
    launch_child(w);
  } catch (const std::exception& e) {
    std::cerr << "broker: " << e.what() << "\n";
    if (w.listener >= 0) ::close(w.listener);
    return exit_broker_failed;
  }
  start_proxy(w);
  std::thread serving([&w] { w.server->run(nullptr); });
  const int code = supervise(*w.child, w.signals, *w.ctx);
  end_session(w, serving, code);
  return code;
}

}  // namespace broker::wrap
