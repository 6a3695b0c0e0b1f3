// `broker log [SESSION|FILE] [--json] [--verify [--key FILE]] [--follow]`.
#include <chrono>
#include <csignal>
#include <fstream>
#include <iostream>
#include <memory>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "session/audit_key.hpp"
#include "session/log_reader.hpp"

namespace broker::cli {

namespace {

struct log_options {
  std::string log_dir;
  std::string which;
  bool json = false;
  bool verify = false;
  bool follow = false;
  std::string key;  // --verify: the audit key to check the signature with
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

// `--verify` (DESIGN §8.2): "ok" only for an intact chain that ends in a session_end signed
// with the user's audit key; "tampered at seq N", "unsigned" and "incomplete" otherwise.
int verify(const std::filesystem::path& file, std::istream& in, const std::string& key_file) {
  const auto result = session::verify_log(in);
  const std::string name = file.string() + ": ";
  const std::string verified = std::to_string(result.records) + " record(s)";
  if (!result.ok && result.bad_line == 0) {
    std::cout << name << "incomplete: " << result.error << "\n";
    return exit_failure;
  }
  if (!result.ok) {
    std::cout << name << "tampered at seq " << result.records + 1 << " (line " << result.bad_line
              << "): " << result.error << "; " << verified << " before it verified\n";
    return exit_failure;
  }
  if (!result.has_end) {
    std::cout << name << "incomplete: " << verified
              << ", hash chain intact, but no session_end (the broker was killed, or the "
                 "session is still running)\n";
    return exit_failure;
  }
  if (result.signer.empty()) {
    std::cout << name << "unsigned: " << verified
              << ", hash chain intact, but the session_end carries no signature (its broker had "
                 "no audit key, or the log was re-chained by someone without it)\n";
    return exit_failure;
  }
  const std::filesystem::path key_path =
      key_file.empty() ? session::default_audit_key_path() : std::filesystem::path(key_file);
  std::string trusted;
  try {
    if (key_path.empty()) throw std::runtime_error("HOME is not set");
    trusted = session::audit_key::load(key_path).public_key_hex();
  } catch (const std::exception& e) {
    std::cout << name << "unverified: the chain is intact and signed, but there is no key to "
              << "check the signature against (" << e.what() << "; use --key FILE)\n";
    return exit_failure;
  }
  if (trusted != result.signer) {
    std::cout << name << "tampered at seq " << result.records
              << ": signed with a key that is not " << key_path.string() << "\n";
    return exit_failure;
  }
  std::cout << name << "ok, " << verified << ", hash chain intact, signed with "
            << key_path.string() << "\n";
  return exit_ok;
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
  if (o.verify) return verify(*file, in, o.key);
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
  app->add_flag("--verify", options->verify,
                "Check the hash chain and the session_end signature: ok (exit 0), tampered at "
                "seq N, unsigned or incomplete (exit 1)");
  app->add_option("--key", options->key,
                  "With --verify: the audit key (PEM, private or public) the signature must be "
                  "made with (default: ~/.config/broker/audit-key)");
  app->add_flag("--follow,-f", options->follow, "Keep printing records until the session ends");
  app->callback([options, &exit_status] { exit_status = run_log(*options); });
}

}  // namespace broker::cli
