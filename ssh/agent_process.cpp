#include "ssh/agent_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <thread>

#include "base/atomic_file.hpp"
#include "base/child_process.hpp"
#include "base/text.hpp"
#include "ssh/agent_messages.hpp"
#include "ssh/wire.hpp"

namespace broker::ssh {

namespace {

namespace fs = std::filesystem;

const std::vector<std::string> system_dirs{"/usr/bin", "/bin", "/usr/local/bin"};
constexpr auto agent_start_time = std::chrono::seconds(5);

std::string expand_home(const std::string& path, const std::string& home) {
  if (path == "~") return home;
  if (path.starts_with("~/")) return home + path.substr(1);
  return path;
}

}  // namespace

std::vector<std::string> user_keys(const std::string& home) {
  std::vector<std::string> keys;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(home + "/.ssh", ec)) {
    const auto path = entry.path();
    if (path.extension() != ".pub") continue;
    auto key = path;
    key.replace_extension();
    if (fs::is_regular_file(key, ec)) keys.push_back(key.string());
  }
  std::sort(keys.begin(), keys.end());
  return keys;
}

namespace {

// The key lines ("TYPE BASE64") `file` has for `name`, as ssh-keygen -F finds them (hashed
// names too); revoked and certificate-authority lines are not host keys.
std::vector<std::string> host_keys_in(const std::string& keygen, const std::string& file,
                                      const std::string& name) {
  std::vector<std::string> out;
  base::program_run run;
  run.program = keygen;
  run.args = {"-F", name, "-f", file};
  run.env = {"PATH=/usr/bin:/bin", "LC_ALL=C"};
  const auto result = base::run_program(run);
  if (!result.ran || result.exit_code != 0) return out;
  std::string_view text(result.output);
  while (!text.empty()) {
    const auto end = text.find('\n');
    const auto line = base::trim(text.substr(0, end));
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    if (line.empty() || line.front() == '#' || line.front() == '@') continue;
    const auto first = line.find_first_of(" \t");
    if (first == std::string_view::npos) continue;
    out.emplace_back(base::trim(line.substr(first)));
  }
  return out;
}

// The keeper: told by the kernel when the broker dies (or by the broker at the end), it ends the
// agent and removes its socket and directory. Only async-signal-safe calls after fork.
// `files`: what the directory holds (the socket, the known_hosts files), null-terminated.
[[noreturn]] void keep(pid_t broker, const char* agent, char* const argv[],
                       const char* const files[], const char* dir) {
  sigset_t waited;
  sigemptyset(&waited);
  sigaddset(&waited, SIGTERM);
  sigaddset(&waited, SIGCHLD);
  ::sigprocmask(SIG_BLOCK, &waited, nullptr);
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != broker) ::_exit(0);
  // The terminal's signals (Ctrl-C) are the command's, not the agent's.
  ::setsid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    const int null = ::open("/dev/null", O_RDWR);
    ::dup2(null, 0);
    ::dup2(null, 1);
    ::dup2(null, 2);
    char* const env[] = {nullptr};
    ::execve(agent, argv, env);
    ::_exit(127);
  }
  for (;;) {
    siginfo_t info;
    const int signo = ::sigwaitinfo(&waited, &info);
    if (signo == SIGTERM && pid > 0) ::kill(pid, SIGTERM);
    if (signo == SIGTERM || signo == SIGCHLD) {
      int status = 0;
      if (pid > 0 && signo == SIGCHLD && ::waitpid(pid, &status, WNOHANG) == 0) continue;
      if (pid > 0 && signo == SIGTERM) ::waitpid(pid, &status, 0);
      for (const char* const* f = files; *f; ++f) ::unlink(*f);
      ::rmdir(dir);
      ::_exit(0);
    }
  }
}

}  // namespace

std::string known_hosts_name(const config::destination& d) {
  if (d.port == 22) return d.host;
  return "[" + d.host + "]:" + std::to_string(d.port);
}

agent_process::agent_process(const agent_plan& plan) {
  const auto agent = base::find_program("ssh-agent", system_dirs);
  if (agent.empty()) throw std::runtime_error("ssh-agent is not installed (openssh-client)");
  char dir[] = "/tmp/broker-ssh-XXXXXX";
  if (!::mkdtemp(dir)) throw std::runtime_error("cannot make a directory for the ssh agent");
  dir_ = dir;
  socket_ = dir_ + "/agent.sock";
  start_keeper(agent);
  try {
    write_known_hosts(plan);
    load_keys(plan);
    list_keys();
  } catch (...) {
    stop();
    throw;
  }
}

agent_process::~agent_process() {
  stop();
}

void agent_process::stop() {
  if (keeper_ > 0) {
    ::kill(keeper_, SIGTERM);
    int status = 0;
    while (::waitpid(keeper_, &status, 0) < 0 && errno == EINTR) {
    }
    keeper_ = -1;
  }
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

void agent_process::start_keeper(const std::string& agent) {
  std::vector<std::string> args{"ssh-agent", "-D", "-a", socket_};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // Everything the directory will hold, named before the fork (nothing is allocated after it).
  static constexpr const char* held[] = {"/agent.sock", "/known_hosts", "/policy_known_hosts"};
  std::vector<std::string> names;
  for (const char* name : held) names.push_back(dir_ + name);
  std::vector<const char*> files;
  for (const auto& name : names) files.push_back(name.c_str());
  files.push_back(nullptr);
  const pid_t broker = ::getpid();
  keeper_ = ::fork();
  if (keeper_ < 0) throw std::runtime_error("cannot start the ssh agent's keeper");
  if (keeper_ == 0) keep(broker, agent.c_str(), argv.data(), files.data(), dir_.c_str());
  const auto deadline = std::chrono::steady_clock::now() + agent_start_time;
  struct stat st {};
  while (::stat(socket_.c_str(), &st) < 0 || !S_ISSOCK(st.st_mode)) {
    int status = 0;
    if (::waitpid(keeper_, &status, WNOHANG) == keeper_) {
      keeper_ = -1;
      stop();
      throw std::runtime_error("ssh-agent ended at start");
    }
    if (std::chrono::steady_clock::now() > deadline) {
      stop();
      throw std::runtime_error("ssh-agent made no socket within 5 s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// ssh-add -h looks each host's keys up in the files -H names; a host with none would make it add
// nothing at all, so the file made here has the keys of the known hosts only, under their names.
void agent_process::write_known_hosts(const agent_plan& plan) {
  const auto keygen = base::find_program("ssh-keygen", system_dirs);
  std::vector<std::string> files;
  for (const char* f : {"/.ssh/known_hosts", "/.ssh/known_hosts2"})
    if (!plan.home.empty()) files.push_back(plan.home + f);
  files.push_back("/etc/ssh/ssh_known_hosts");
  files.push_back("/etc/ssh/ssh_known_hosts2");
  if (!plan.host_keys.empty()) {
    std::string lines;
    for (const auto& line : plan.host_keys) lines += line + "\n";
    const auto policy_file = dir_ + "/policy_known_hosts";
    base::write_file_atomically(policy_file, lines, 0600, base::durability::session);
    files.push_back(policy_file);
  }
  std::string out;
  for (const auto& d : plan.hosts) {
    const auto name = known_hosts_name(d);
    std::vector<std::string> found;
    std::error_code ec;
    for (const auto& file : files)
      if (!keygen.empty() && fs::exists(file, ec))
        for (auto& key : host_keys_in(keygen, file, name)) found.push_back(std::move(key));
    if (found.empty()) {
      unknown_hosts_.push_back(name);
      continue;
    }
    hosts_.push_back(name);
    for (const auto& key : found) out += d.host + " " + key + "\n";
  }
  base::write_file_atomically(dir_ + "/known_hosts", out, 0600, base::durability::session);
}

void agent_process::load_keys(const agent_plan& plan) {
  if (hosts_.empty()) return;  // no host to bind a key to: the agent holds none
  const auto add = base::find_program("ssh-add", system_dirs);
  if (add.empty()) throw std::runtime_error("ssh-add is not installed (openssh-client)");
  std::vector<std::string> keys;
  for (const auto& k : plan.keys) keys.push_back(expand_home(k, plan.home));
  if (plan.keys.empty()) keys = user_keys(plan.home);
  std::vector<std::string> hosts;
  for (const auto& d : plan.hosts)
    if (std::find(unknown_hosts_.begin(), unknown_hosts_.end(), known_hosts_name(d)) ==
        unknown_hosts_.end())
      hosts.push_back(d.host);
  std::sort(hosts.begin(), hosts.end());
  hosts.erase(std::unique(hosts.begin(), hosts.end()), hosts.end());
  for (const auto& key : keys) {
    base::program_run run;
    run.program = add;
    run.args = {"-q", "-H", dir_ + "/known_hosts"};
    for (const auto& h : hosts) {
      run.args.push_back("-h");
      run.args.push_back(h);
    }
    run.args.push_back(key);
    run.env = {"SSH_AUTH_SOCK=" + socket_, "PATH=/usr/bin:/bin", "HOME=" + plan.home};
    // A passphrase comes from the person at the terminal, or the user's own SSH_ASKPASS.
    for (const char* name : {"SSH_ASKPASS", "SSH_ASKPASS_REQUIRE", "DISPLAY", "WAYLAND_DISPLAY"})
      if (const char* value = std::getenv(name)) run.env.push_back(std::string(name) + "=" + value);
    run.share_terminal = plan.interactive;
    run.time = plan.interactive ? std::chrono::minutes(2) : std::chrono::seconds(20);
    const auto result = base::run_program(run);
    if (!result.ran || result.exit_code != 0) not_loaded_.push_back(key);
  }
}

// The agent's own list, asked on its socket as any client asks.
void agent_process::list_keys() {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  socket_.copy(addr.sun_path, sizeof addr.sun_path - 1);
  std::string answer;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::write(fd, "\0\0\0\1\x0b", 5) == 5) {
    char chunk[16384];
    for (;;) {
      const ssize_t n = ::read(fd, chunk, sizeof chunk);
      if (n <= 0) break;
      answer.append(chunk, static_cast<std::size_t>(n));
      if (answer.size() >= 4) {
        wire_reader head(answer);
        if (answer.size() >= 4 + std::size_t(*head.u32())) break;
      }
      if (answer.size() > max_agent_message) break;
    }
  }
  ::close(fd);
  wire_reader r(answer);
  const auto length = r.u32();
  const auto type = r.byte();
  const auto count = r.u32();
  if (!length || type != agent_identities_answer || !count) return;
  for (std::uint32_t i = 0; i < *count; ++i) {
    const auto blob = r.string();
    const auto comment = r.string();
    if (!blob || !comment) return;
    keys_.push_back(fingerprint(*blob));
  }
}

}  // namespace broker::ssh
