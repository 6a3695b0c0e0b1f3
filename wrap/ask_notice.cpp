#include "wrap/ask_notice.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>
#include <vector>

#include "base/text.hpp"
#include "live/ask_text.hpp"

extern char** environ;

namespace broker::wrap {

using live::argument_lines;
using live::asked_what;

std::string ask_line(const nlohmann::ordered_json& ask) {
  const std::string id = ask.value("id", "");
  std::string who;
  if (ask.contains("pid") && ask["pid"].is_number()) {
    who = " (pid " + std::to_string(ask["pid"].get<int>());
    if (ask.contains("exe") && ask["exe"].is_string()) who += " " + ask["exe"].get<std::string>();
    who += ")";
  }
  // The method, URL and program are the child's to choose: never a control byte on the
  // user's terminal.
  if (ask.contains("mcp")) {
    const std::string arguments = argument_lines(ask, "    ");
    return base::printable("broker: ask " + id + ": " + asked_what(ask) + who + ": " +
                           ask["mcp"].value("why", "") + "; waiting " +
                           std::to_string(ask.value("timeout_s", 0L)) + " s: broker approve " + id +
                           " [--once]  |  broker deny " + id) +
           "\n" + (arguments.empty() ? "" : "  arguments:\n" + arguments);
  }
  return base::printable("broker: ask " + id + ": " + asked_what(ask) + who +
                         " is not in the policy; waiting " +
                         std::to_string(ask.value("timeout_s", 0L)) + " s: broker approve " + id +
                         " [--once|--always] [--path P]  |  broker deny " + id) +
         "\n";
}

std::string terminal_ask_line(const nlohmann::ordered_json& ask, std::size_t columns) {
  const std::string id = ask.value("id", "");
  std::string program;
  if (ask.contains("exe") && ask["exe"].is_string()) {
    const auto exe = ask["exe"].get<std::string>();
    program = " (" + exe.substr(exe.rfind('/') + 1) + ")";
  }
  const std::string head = base::printable("broker: ask " + id + ": ");
  std::string what = base::printable(asked_what(ask));
  const std::string tail = base::printable(program) + " - broker approve|deny " + id;
  // The last column stays empty: a character there would wrap the row on some terminals.
  const std::size_t room = columns > 1 ? columns - 1 : 0;
  if (head.size() + what.size() + tail.size() > room) {
    const std::size_t left =
        room > head.size() + tail.size() ? room - head.size() - tail.size() : 0;
    what = left > 3 ? what.substr(0, left - 3) + "..." : "";
  }
  std::string line = head + what + tail;
  if (line.size() > room) line.resize(room);  // narrower than the id and its commands
  return line;
}

void announce_ask(const nlohmann::ordered_json& ask, const std::string& notify_command) {
  std::string line = ask_line(ask);
  winsize size{};
  if (::isatty(STDERR_FILENO) && ::ioctl(STDERR_FILENO, TIOCGWINSZ, &size) == 0 &&
      size.ws_col > 0) {
    // From the start of the row the agent's UI left the cursor on, erased to its end; \r\n
    // also where the agent's raw mode leaves no output processing.
    const std::string row = "\r" + terminal_ask_line(ask, size.ws_col) + "\x1b[K\r\n";
    (void)!::write(STDERR_FILENO, row.data(), row.size());
  } else {
    (void)!::write(STDERR_FILENO, line.data(), line.size());
  }
  if (notify_command.empty()) return;
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) env.emplace_back(*e);
  std::string text = line;
  if (!text.empty() && text.back() == '\n') text.pop_back();
  env.push_back("BROKER_ASK_ID=" + ask.value("id", ""));
  env.push_back("BROKER_ASK_SESSION=" + ask.value("session", ""));
  env.push_back("BROKER_ASK_METHOD=" + base::printable(ask.value("method", "")));
  env.push_back("BROKER_ASK_URL=" + base::printable(ask.value("url", "")));
  env.push_back("BROKER_ASK_TEXT=" + text);
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string sh = "/bin/sh", dash_c = "-c", command = notify_command;
  char* argv[] = {sh.data(), dash_c.data(), command.data(), nullptr};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  // Its output would land in the agent's terminal: it gets none.
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  // The session blocks the signals it passes to the command; this command gets none blocked.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  pid_t pid = 0;
  const int failed = ::posix_spawn(&pid, "/bin/sh", &actions, &attr, argv, envp.data());
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  if (failed) return;
  std::thread([pid] { ::waitpid(pid, nullptr, 0); }).detach();
}

}  // namespace broker::wrap
