// `broker keep SESSION --list | --diff [PATH...] | PATH... | --all`: review and take in what
// `wrap` kept out of the host (docs/security-model.md), and say so in the session's audit log.
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "live/session_setup.hpp"
#include "sandbox/kept.hpp"
#include "session/audit_log.hpp"

extern char** environ;

namespace broker::cli {

namespace {

namespace fs = std::filesystem;

struct keep_options {
  std::string log_dir;
  std::string session;
  std::vector<std::string> paths;
  bool list = false, diff = false, all = false;
};

// One thing the session kept out, as its log says.
struct kept_entry {
  std::string path, reason, kept, change;
};

// The session's kept_out records not yet taken in, by path; and its last record's fields, for
// the session_end that closes the log again (its counts and exit stay what they were).
struct kept_log {
  std::map<std::string, kept_entry> entries;
  nlohmann::ordered_json end_fields{{"event", "session_end"}};
};

kept_log read_kept_log(const fs::path& file) {
  kept_log out;
  std::ifstream in(file);
  std::string line, last;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    last = line;
    const auto r = nlohmann::json::parse(line, nullptr, false);
    if (!r.is_object()) continue;
    const std::string event = r.value("event", "");
    if (event == "kept_out")
      out.entries[r.value("path", "")] = {r.value("path", ""), r.value("reason", ""),
                                          r.value("kept", ""), r.value("change", "set_aside")};
    else if (event == "kept")
      out.entries.erase(r.value("path", ""));
  }
  std::erase_if(out.entries, [](const auto& e) { return e.second.change == "dropped"; });
  auto fields = nlohmann::ordered_json::parse(last, nullptr, false);
  if (fields.is_object() && fields.value("event", "") == "session_end") {
    for (const char* reserved : {"ts", "session", "seq", "prev", "hash", "signature"})
      fields.erase(reserved);
    out.end_fields = std::move(fields);
  }
  return out;
}

fs::path absolute_path(const std::string& given) {
  std::string p = given;
  if (p == "~" || p.starts_with("~/")) {
    const char* home = std::getenv("HOME");
    p = std::string(home ? home : "") + p.substr(1);
  }
  return fs::absolute(p).lexically_normal();
}

// `diff -ruN` of the host's path against the session's version, links not followed.
int show_diff(const kept_entry& e) {
  if (e.change == "removed") {
    std::cout << "removed in the session: " << e.path << "\n";
    return 0;
  }
  std::string a0 = "diff", a1 = "-ruN", a2 = "--no-dereference", a3 = e.path, a4 = e.kept;
  char* argv[] = {a0.data(), a1.data(), a2.data(), a3.data(), a4.data(), nullptr};
  std::cout.flush();
  pid_t pid = -1;
  if (::posix_spawnp(&pid, "diff", nullptr, nullptr, argv, environ) != 0) {
    std::cerr << "broker: cannot run diff\n";
    return 1;
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) && WEXITSTATUS(status) <= 1 ? 0 : 1;
}

// Takes one in: the session's version to its place, or the session's removal done.
void take(const fs::path& kept_root, const kept_entry& e) {
  if (e.change != "removed" && e.kept.empty())
    throw std::runtime_error("the session's version of " + e.path + " was not set aside (" +
                             e.reason + ")");
  if (e.change != "removed") {
    sandbox::take_kept(kept_root, e.path);
    return;
  }
  struct stat st {};
  if (::lstat(e.path.c_str(), &st) < 0) return;  // gone already
  if (S_ISDIR(st.st_mode))
    throw std::runtime_error(e.path + " is a directory: remove it yourself if you mean to");
  if (::unlink(e.path.c_str()) < 0)
    throw std::runtime_error("cannot remove " + e.path + ": " + std::strerror(errno));
}

// Each chosen entry taken into the home, and a `kept` record for it in the session's log.
int take_in(const keep_options& o, const fs::path& kept_root, const std::vector<kept_entry>& chosen,
            const kept_log& log) {
  common_options common;
  common.log_dir = o.log_dir;
  auto audit = open_audit(common, o.session);
  int status = exit_ok;
  for (const auto& e : chosen) {
    try {
      take(kept_root, e);
    } catch (const std::exception& error) {
      std::cerr << "broker: " << error.what() << "\n";
      status = 1;
      continue;
    }
    audit->write({{"event", "kept"}, {"path", e.path}, {"from", e.kept}});
    std::cout << "broker: " << e.path
              << (e.change == "removed" ? " removed, as the session did\n"
                                        : " taken in from " + e.kept + "\n");
  }
  audit->end(log.end_fields);
  if (audit->failed()) {
    std::cerr << "broker: warning: the session's audit log could not record it ("
              << audit->failure() << ")\n";
    return 1;
  }
  return status;
}

int run_keep(const keep_options& o) {
  const auto log_dir = log_dir_or_default(o.log_dir);
  const auto kept_root = log_dir / (o.session + ".kept");
  const auto log_file = log_dir / (o.session + ".jsonl");
  if (o.session.empty() || o.session.find('/') != std::string::npos || !fs::exists(log_file)) {
    std::cerr << "broker: no session " << o.session << " in " << log_dir.string() << "\n";
    return exit_usage;
  }
  const kept_log log = read_kept_log(log_file);
  std::vector<kept_entry> chosen;
  for (const auto& p : o.paths) {
    const auto path = absolute_path(p).string();
    const auto it = log.entries.find(path);
    if (it == log.entries.end()) {
      std::cerr << "broker: nothing was kept out at " << path << " in this session\n";
      return 1;
    }
    chosen.push_back(it->second);
  }
  if (o.paths.empty() && (o.list || o.diff || o.all))
    for (const auto& [path, e] : log.entries)
      // What could not be set aside (a FIFO, a socket) is listed, but there is nothing to take.
      if (o.list || e.change == "removed" || !e.kept.empty()) chosen.push_back(e);
  if (o.list) {
    for (const auto& e : chosen) {
      std::cout << e.path << " (" << e.reason << ")";
      if (!e.kept.empty()) std::cout << " -> " << e.kept;
      std::cout << "\n";
    }
    return exit_ok;
  }
  if (o.diff) {
    int status = exit_ok;
    for (const auto& e : chosen) status |= show_diff(e);
    return status;
  }
  if (chosen.empty()) {
    std::cerr << "broker: name what to take in (PATH..., or --all), or review with --list or "
                 "--diff\n";
    return exit_usage;
  }
  return take_in(o, kept_root, chosen, log);
}

}  // namespace

void register_keep(CLI::App& root, int& exit_status) {
  auto o = std::make_shared<keep_options>();
  auto* app = root.add_subcommand(
      "keep", "Review and take in what wrap kept out of your home and the rest of the host");
  app->add_option("--log-dir", o->log_dir, "Where the session's audit log is");
  app->add_flag("--list", o->list, "List what the session kept out");
  app->add_flag("--diff", o->diff, "Show what the session changed, as a diff against yours");
  app->add_flag("--all", o->all, "Take in everything the session kept out (after review)");
  app->add_option("session", o->session, "The session that kept it out")->required();
  app->add_option("paths", o->paths, "Where it would have gone (as wrap named it)");
  app->callback([o, &exit_status] { exit_status = run_keep(*o); });
}

}  // namespace broker::cli
