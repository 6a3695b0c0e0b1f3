// `broker demo [--keep]`: the whole idea in one offline run (docs/cli.md). A stand-in for
// api.github.com on loopback, then `broker wrap` around three curls: the dummy token swapped for
// the real one on its bound host, a host the policy denies, the dummy blocked on a host it is not
// bound to; then the session's audit log and its hash-chain check. Exit 0 when all three
// outcomes are in the log as expected.
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "cli/demo_upstream.hpp"
#include "session/log_reader.hpp"

extern char** environ;

namespace broker::cli {

namespace {

namespace fs = std::filesystem;

constexpr const char* demo_policy = R"({
  // broker demo: two hosts, one credential bound to the first; everything else is denied
  "version": 1,
  "allow": [
    { "host": "api.github.com", "ports": [443] },
    { "host": "uploads.example.net", "ports": [443] }
  ],
  "credentials": {
    "github": { "type": "github", "env": ["GITHUB_TOKEN"], "hosts": ["api.github.com"] }
  }
}
)";

// Runs inside the session as `sh -c SCRIPT demo CURL`. Single-quoted printf formats: the
// $GITHUB_TOKEN in them is shown as written, only the %.8s prefix is the child's value.
constexpr const char* demo_script = R"(curl=$1
printf '\n[1] Inside the session GITHUB_TOKEN is a dummy of the right shape: %.8s...\n' "$GITHUB_TOKEN"
printf '    broker swaps it for the real token on api.github.com, the host it is bound to:\n'
printf '    $ curl -H "Authorization: token $GITHUB_TOKEN" https://api.github.com/user\n'
"$curl" -q -sS --max-time 10 -H "Authorization: token $GITHUB_TOKEN" https://api.github.com/user
printf '\n[2] A host the policy does not allow is refused; nothing is dialed:\n'
printf '    $ curl https://example.com/\n'
"$curl" -q -sS --max-time 10 https://example.com/
printf '\n[3] The dummy sent to an allowed host it is not bound to is blocked and recorded:\n'
printf '    $ curl -H "Authorization: token $GITHUB_TOKEN" https://uploads.example.net/\n'
"$curl" -q -sS --max-time 10 -H "Authorization: token $GITHUB_TOKEN" https://uploads.example.net/
)";

// A fixed list, not PATH: nothing is run from a directory the caller's environment chose.
std::string find_curl() {
  for (const char* candidate : {"/usr/bin/curl", "/usr/local/bin/curl", "/bin/curl"}) {
    if (::access(candidate, X_OK) == 0) return candidate;
  }
  return {};
}

fs::path make_work_dir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern =
      std::string(tmp != nullptr && *tmp == '/' ? tmp : "/tmp") + "/broker-demo-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr)
    throw std::runtime_error("cannot create a directory under " + pattern);
  return pattern;
}

void write_file(const fs::path& file, const std::string& text) {
  std::ofstream out(file);
  out << text;
  if (!out.flush()) throw std::runtime_error("cannot write " + file.string());
}

// Runs this binary with `args`, stdin from /dev/null, in our environment plus `extra`
// ("NAME=VALUE", replacing NAME); returns its exit status (128+N when killed by signal N).
int run_self(const std::vector<std::string>& args, std::string* extra = nullptr) {
  std::vector<char*> argv{const_cast<char*>("broker")};
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> env;
  const std::string_view name =
      extra ? std::string_view(*extra).substr(0, extra->find('=') + 1) : "";
  for (char** e = environ; *e != nullptr; ++e) {
    if (name.empty() || !std::string_view(*e).starts_with(name)) env.push_back(*e);
  }
  if (extra) env.push_back(extra->data());
  env.push_back(nullptr);
  std::cout.flush();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    ::sigaction(SIGINT, &dfl, nullptr);
    const int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, STDIN_FILENO);
    ::execve("/proc/self/exe", argv.data(), env.data());
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return 127;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string text(const nlohmann::json& record, const char* key) {
  const auto it = record.find(key);
  return it != record.end() && it->is_string() ? it->get<std::string>() : std::string();
}

struct outcomes {
  bool swapped = false;  // a request with credential github answered 200 by the upstream
  bool denied = false;   // a refusal policy_denied
  bool blocked = false;  // an exfiltration_blocked record
};

outcomes read_outcomes(const fs::path& log) {
  outcomes found;
  std::ifstream in(log);
  std::string line;
  while (std::getline(in, line)) {
    const auto record = nlohmann::json::parse(line, nullptr, false);
    if (!record.is_object()) continue;
    const auto event = text(record, "event");
    const auto status = record.find("status");
    if (event == "request" && text(record, "credential") == "github" && status != record.end() &&
        *status == 200)
      found.swapped = true;
    if (event == "refused" && text(record, "error") == "policy_denied") found.denied = true;
    if (event == "exfiltration_blocked") found.blocked = true;
  }
  return found;
}

void heading(const std::string& title) {
  std::cout << "\n== " << title << " ==\n";
}

// The session: wrap with three curls inside, once more with --isolate env when wrap cannot
// start the command in a namespace (125). Returns wrap's status and the session's name.
std::pair<int, std::string> run_session(const fs::path& dir, const std::string& port,
                                        const std::string& curl, std::string& token_var) {
  std::string session;
  int status = 0;
  for (const char* isolate : {"auto", "env"}) {
    session = "demo-" + session::new_session_id().substr(2);
    heading("broker wrap --session " + session + " -- sh   (three curls inside the session)");
    status = run_self(
        {"wrap", "--policy", (dir / "policy.json").string(), "--log-dir", (dir / "logs").string(),
         "--connect-to", "api.github.com:443:127.0.0.1:" + port, "--connect-to",
         "uploads.example.net:443:127.0.0.1:" + port, "--upstream-ca",
         (dir / "upstream-ca.pem").string(),
         // A single-valued option last: `--` right after a repeatable one is not taken as the end.
         "--isolate", isolate, "--session", session, "--", "/bin/sh", "-c", demo_script, "demo",
         curl},
        &token_var);
    if (status != 125) break;
    if (std::string_view(isolate) == "auto")
      std::cout << "\nbroker demo: wrap could not start the command (see above); once more with "
                   "--isolate env\n";
  }
  return {status, session};
}

// What the demo must have shown and did not ("" when it showed everything).
std::string missing_outcomes(const outcomes& seen, int wrap_status, int verify_status,
                             const demo_upstream& upstream) {
  std::string missing;
  if (wrap_status != 0) missing += "; wrap exited " + std::to_string(wrap_status);
  if (!seen.swapped || upstream.answered_real() == 0) missing += "; no swapped request with 200";
  if (!seen.denied) missing += "; no policy_denied refusal";
  if (!seen.blocked) missing += "; no exfiltration_blocked record";
  if (verify_status != 0) missing += "; the hash chain did not verify";
  return missing;
}

int run_demo(const fs::path& dir, const std::string& curl) {
  demo_upstream upstream("api.github.com");
  std::string token_var = "GITHUB_TOKEN=" + std::string(upstream.real_token().expose());
  const auto policy = dir / "policy.json";
  const auto log_dir = dir / "logs";
  write_file(policy, demo_policy);
  write_file(dir / "upstream-ca.pem", upstream.ca_pem());
  const std::string port = std::to_string(upstream.port());
  std::cout << "broker demo: offline, on loopback, in " << dir.string()
            << " (removed at the end unless --keep)\n\n"
            << "  upstream  a stand-in for api.github.com on 127.0.0.1:" << port
            << ", TLS with its own CA;\n"
            << "            GET /user answers 200 only to the real token\n"
            << "  token     a real-shaped GitHub token made for this run, given to broker only\n"
            << "  policy    " << policy.string() << ":\n"
            << demo_policy;

  const auto [wrap_status, session] = run_session(dir, port, curl, token_var);
  base::wipe(token_var);

  heading("broker log " + session + "   (the session's audit log)");
  run_self({"log", session, "--log-dir", log_dir.string()});
  heading("broker log " + session + " --verify");
  const int verify_status = run_self({"log", session, "--log-dir", log_dir.string(), "--verify"});

  const auto missing = missing_outcomes(read_outcomes(log_dir / (session + ".jsonl")), wrap_status,
                                        verify_status, upstream);
  std::cout << "\n";
  if (!missing.empty()) {
    std::cout.flush();
    std::cerr << "broker demo: FAILED" << missing << "\n";
    return exit_failure;
  }
  std::cout << "broker demo: ok. The command only ever held the dummy; the upstream got the real "
               "token,\nexample.com was denied, and the dummy sent elsewhere was blocked and "
               "recorded.\n";
  return exit_ok;
}

int demo(bool keep) {
  const std::string curl = find_curl();
  if (curl.empty()) {
    std::cerr << "broker demo: needs curl (no /usr/bin/curl); install it, e.g. "
                 "`apt-get install curl`\n";
    return exit_failure;
  }
  // Ctrl-C reaches the wrapped command through wrap; the demo stays to clean up.
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGINT, &ignore, nullptr);
  fs::path dir;
  int status = exit_failure;
  try {
    dir = make_work_dir();
    status = run_demo(dir, curl);
  } catch (const std::exception& e) {
    std::cerr << "broker demo: " << e.what() << "\n";
  }
  std::error_code ec;
  if (keep && !dir.empty())
    std::cout << "kept " << dir.string() << " (policy.json, upstream-ca.pem, logs/)\n";
  else if (!dir.empty())
    fs::remove_all(dir, ec);
  return status;
}

}  // namespace

void register_demo(CLI::App& root, int& exit_status) {
  auto keep = std::make_shared<bool>(false);
  auto* app = root.add_subcommand("demo",
                                  "Self-contained offline demo: a fake upstream, a "
                                  "wrapped curl, and the session's audit log");
  app->add_flag("--keep", *keep, "Keep the demo's directory (policy, upstream CA, audit log)");
  app->callback([keep, &exit_status] { exit_status = demo(*keep); });
}

}  // namespace broker::cli
