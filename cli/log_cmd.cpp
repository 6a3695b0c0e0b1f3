// `broker log [SESSION|FILE] [--json] [--verify] [--follow]`.
#include <chrono>
#include <csignal>
#include <fstream>
#include <iostream>
#include <memory>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "session/log_reader.hpp"

namespace broker::cli {

namespace {

struct log_options {
  std::string log_dir;
  std::string which;
  bool json = false;
  bool verify = false;
  bool follow = false;
};

volatile std::sig_atomic_t stop_following = 0;

// Prints complete lines from `in`; returns true once a session_end record was printed.
bool print_lines(std::istream& in, const log_options& o, std::string& partial) {
  bool ended = false;
  std::string line;
  while (std::getline(in, line)) {
    if (in.eof()) {  // no newline yet: the writer is mid-line
      partial += line;
      break;
    }
    line = partial + line;
    partial.clear();
    if (line.empty()) continue;
    const auto record = nlohmann::json::parse(line, nullptr, false);
    if (record.is_discarded()) {
      std::cout << (o.json ? line : "(unparseable line) " + line) << "\n";
      continue;
    }
    std::cout << (o.json ? line : session::format_record(record)) << "\n";
    if (record.value("event", "") == "session_end") ended = true;
  }
  std::cout.flush();
  return ended;
}

int run_log(const log_options& o) {
  const auto dir = log_dir_or_default(o.log_dir);
  const auto file = session::find_log(dir, o.which);
  if (!file) {
    std::cerr << "broker: no audit log "
              << (o.which.empty() ? "in " + dir.string() : "for " + o.which) << "\n";
    return exit_failure;
  }
  std::ifstream in(*file);
  if (!in) {
    std::cerr << "broker: cannot read " << file->string() << "\n";
    return exit_failure;
  }
  if (o.verify) {
    const auto result = session::verify_log(in);
    if (!result.ok && result.bad_line == 0) {
      std::cout << file->string() << ": " << result.error << "\n";
      return exit_failure;
    }
    if (!result.ok) {
      std::cout << file->string() << ": TAMPERED or damaged at line " << result.bad_line << ": "
                << result.error << " (" << result.records << " record(s) before it verified)\n";
      return exit_failure;
    }
    std::cout << file->string() << ": ok, " << result.records << " record(s), hash chain intact"
              << (result.has_end ? "" : "; no session_end yet (running, or cut short)") << "\n";
    return exit_ok;
  }
  std::string partial;
  bool ended = print_lines(in, o, partial);
  if (!o.follow) return exit_ok;
  std::signal(SIGINT, [](int) { stop_following = 1; });
  while (!ended && !stop_following) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    in.clear();
    ended = print_lines(in, o, partial);
  }
  return exit_ok;
}

}  // namespace

void register_log(CLI::App& root, int& exit_status) {
  auto options = std::make_shared<log_options>();
  auto* app = root.add_subcommand("log", "Show a session's audit log (default: the newest)");
  add_log_dir_option(*app, options->log_dir);
  app->add_option("session", options->which, "Session id or log file path");
  app->add_flag("--json", options->json, "Print the raw JSONL records");
  app->add_flag("--verify", options->verify, "Check the hash chain; exit 1 when it is broken");
  app->add_flag("--follow,-f", options->follow, "Keep printing records until the session ends");
  app->callback([options, &exit_status] { exit_status = run_log(*options); });
}

}  // namespace broker::cli
