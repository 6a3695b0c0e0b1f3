#include "wrap/ssh_setup.hpp"

#include <unistd.h>

#include <algorithm>
#include <iostream>

#include "base/atomic_file.hpp"
#include "config/host_pattern.hpp"
#include "sandbox/host_files.hpp"
#include "sandbox/workspace_origin.hpp"
#include "ssh/agent_filter.hpp"

namespace broker::wrap {

// The rule makes git push over SSH as it does outside (docs/agents.md).
std::shared_ptr<const config::policy_set> with_ssh_origin(
    std::shared_ptr<const config::policy_set> policy, const std::string& home,
    const std::string& cwd) {
  const auto& written = policy->layers();
  if (written.size() != 1 || written[0].source != "<default>") return policy;
  if (ssh::user_keys(home).empty()) return policy;
  sandbox::github_remote origin;
  try {
    origin = sandbox::workspace_origin(cwd);
  } catch (const std::runtime_error&) {
    return policy;  // no repository, or no origin: nothing to add
  }
  static const char* const hosts[] = {"github.com", "gitlab.com", "bitbucket.org"};
  if (!origin.ssh || std::find(std::begin(hosts), std::end(hosts), origin.host) == std::end(hosts))
    return policy;
  auto layers = written;
  config::rule r;
  r.name = "allow[" + std::to_string(layers[0].allow.size()) + "]";
  r.host = config::host_pattern::parse(origin.host);
  r.ports = {22};
  r.tunnel = r.ssh = true;
  layers[0].allow.push_back(std::move(r));
  return std::make_shared<config::policy_set>(std::move(layers));
}

// SSH (docs/security-model.md, "SSH"): with ssh rules, the session's agent, loaded with the
// user's keys bound to the hosts the rules allow, and the socket the command reaches it by.
ssh_setup start_ssh(const config::policy_set& policy, const std::string& home,
                    const std::filesystem::path& session_dir, bool netns) {
  ssh_setup out;
  ssh::agent_plan plan;
  plan.hosts = policy.ssh_destinations();
  if (plan.hosts.empty()) return out;
  plan.home = home;
  for (const auto& layer : policy.layers()) {
    plan.keys.insert(plan.keys.end(), layer.ssh.keys.begin(), layer.ssh.keys.end());
    plan.host_keys.insert(plan.host_keys.end(), layer.ssh.host_keys.begin(),
                          layer.ssh.host_keys.end());
  }
  plan.interactive = ::isatty(STDIN_FILENO) && ::isatty(STDERR_FILENO);
  try {
    out.agent = std::make_unique<ssh::agent_process>(plan);
    out.socket = (session_dir / "ssh-agent.sock").string();
    out.listener = ssh::agent_listener(out.socket);
  } catch (const std::exception& e) {
    std::cerr << "broker: warning: ssh: " << e.what() << "; ssh inside has no keys\n";
    return ssh_setup{};
  }
  if (!plan.host_keys.empty() && netns) {
    std::string lines;
    for (const auto& line : plan.host_keys) lines += line + "\n";
    out.known_hosts = (session_dir / "ssh_known_hosts").string();
    base::write_file_atomically(out.known_hosts, lines, 0644, base::durability::session);
  }
  const auto& agent = *out.agent;
  for (const auto& host : agent.hosts_without_key())
    std::cerr << "broker: warning: ssh: no known host key for " << host
              << " (in ~/.ssh/known_hosts, /etc/ssh/ssh_known_hosts or the policy's "
                 "\"ssh\": {\"host_keys\"}); the agent signs for no key there\n";
  for (const auto& key : agent.keys_not_loaded())
    std::cerr << "broker: warning: ssh: " << key << " did not load (a passphrase not given?)\n";
  std::string hosts;
  for (const auto& h : agent.hosts()) hosts += (hosts.empty() ? "" : ", ") + h;
  if (hosts.empty())
    std::cerr << "broker: ssh: the session's agent holds no key: no host its rules allow has a "
                 "known host key\n";
  else
    std::cerr << "broker: ssh: the session's agent holds " << agent.keys().size()
              << (agent.keys().size() == 1 ? " key" : " keys") << ", for " << hosts
              << " only (SSH_AUTH_SOCK)\n";
  return out;
}

// With the session's agent, what the command's ssh reads of host keys: the user's known_hosts,
// read-only (the agent's keys are bound to the host keys known at the start), and the policy's
// "host_keys" through a copy of the system's ssh_config that names them too.
void add_ssh_files(const ssh_setup& ssh, const std::string& home,
                   const std::filesystem::path& session_dir, sandbox::launch_options& launch) {
  std::error_code ec;
  for (const char* name : {"/.ssh/known_hosts", "/.ssh/known_hosts2"}) {
    const auto path = home + name;
    if (!home.empty() && std::filesystem::is_regular_file(path, ec))
      launch.read_only.push_back(path);
  }
  const std::string system_config = "/etc/ssh/ssh_config";
  if (ssh.known_hosts.empty() || !std::filesystem::is_regular_file(system_config, ec)) return;
  std::string text =
      "# broker: the policy's \"ssh\": {\"host_keys\"} besides the system's\n"
      "GlobalKnownHostsFile /etc/ssh/ssh_known_hosts /etc/ssh/ssh_known_hosts2 " +
      ssh.known_hosts + "\n";
  if (auto original = sandbox::read_regular_file(system_config, 1 << 20)) text += *original;
  const auto copy = session_dir / "ssh_config";
  base::write_file_atomically(copy, text, 0644, base::durability::session);
  launch.etc_files.emplace_back(copy.string(), system_config);
}

}  // namespace broker::wrap
