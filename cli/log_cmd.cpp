// `broker log [SESSION|FILE] [--json | --format jsonl|text|ocsf] [--verify [--key FILE]]
// [--follow]`.
#include <chrono>
#include <csignal>
#include <fstream>
#include <iostream>
#include <memory>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "session/audit_files.hpp"
#include "session/audit_key.hpp"
#include "session/audit_merge.hpp"
#include "session/log_reader.hpp"
#include "session/ocsf.hpp"

namespace broker::cli {

namespace {

struct log_options {
  std::string log_dir;
  std::string which;
  bool json = false;  // --json: --format jsonl
  std::string format = "text";
  bool verify = false;
  bool follow = false;
  std::string key;  // --verify: the audit key to check the signature with
};

volatile std::sig_atomic_t stop_following = 0;

// Prints every line `log` has now, in merged order: as recorded (jsonl), for people (text), or
// as OCSF events (session/ocsf.hpp; a line that is not JSON is an event too, the line unmapped).
void print_lines(session::merged_log& log, const log_options& o, session::ocsf_mapper& ocsf) {
  while (auto line = log.next()) {
    if (line->empty()) continue;
    const auto record = nlohmann::json::parse(*line, nullptr, false);
    if (o.format == "jsonl") {
      std::cout << *line << "\n";
    } else if (o.format == "ocsf") {
      const auto event = record.is_discarded()
                             ? ocsf.map({{"event", "unparseable_line"}, {"line", *line}})
                             : ocsf.map(record);
      std::cout << event.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } else {
      std::cout << (record.is_discarded() ? "(unparseable line) " + *line
                                          : session::format_record(record))
                << "\n";
    }
  }
  std::cout.flush();
}

// How a verification reads (docs/audit-log.md): "ok" only for an intact chain that ends in a
// session_end signed with the user's audit key; "tampered at seq N", "truncated at seq N" (a
// partial last line), "unsigned", "incomplete" and "unverified" otherwise. `name` says which chain.
// `with_files`: a replica's chain across its files, so the count of files is shown and a bad line
// is named by file (in a single file the line number is enough, and the output is as it always
// was).
int report(const std::string& name, const session::verify_result& result,
           const std::string& key_file, bool with_files) {
  const std::string verified =
      std::to_string(result.records) + " record(s)" +
      (with_files ? " in " + std::to_string(result.files) + " file(s)" : std::string());
  const std::string where = with_files ? result.bad_file.string() + " " : std::string();
  const std::string before_it = std::to_string(result.records) + " record(s) before it verified";
  if (!result.ok && result.bad_line == 0 && result.bad_file.empty()) {
    std::cout << name << "incomplete: " << result.error << "\n";
    return exit_failure;
  }
  if (result.truncated) {
    std::cout << name << "truncated at seq " << result.records + 1 << " (" << where << "line "
              << result.bad_line << "): " << result.error << "; " << before_it
              << ", hash chain intact up to the cut\n";
    return exit_failure;
  }
  if (!result.ok && result.bad_line == 0) {  // a whole file missing or emptied
    std::cout << name << "tampered at seq " << result.records + 1 << " ("
              << result.bad_file.string() << "): " << result.error << "; " << before_it << "\n";
    return exit_failure;
  }
  if (!result.ok) {
    std::cout << name << "tampered at seq " << result.records + 1 << " (" << where << "line "
              << result.bad_line << "): " << result.error << "; " << before_it << "\n";
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
    std::cout << name << "tampered at seq " << result.records << ": signed with a key that is not "
              << key_path.string() << "\n";
    return exit_failure;
  }
  std::cout << name << "ok, " << verified << ", hash chain intact, signed with "
            << key_path.string() << "\n";
  return exit_ok;
}

// `--verify`: a single file as one chain; a session's every replica as its own chain across its
// files, one line each. Exit 0 only when every one is ok.
int verify(const session::log_selection& selection, const std::string& key_file) {
  if (selection.single_file()) {
    const auto& file = selection.files.front().files.front().path;
    std::ifstream in(file, std::ios::binary);
    if (!in) {
      std::cerr << "broker: cannot read " << file.string() << "\n";
      return exit_failure;
    }
    return report(file.string() + ": ", session::verify_log(in), key_file, false);
  }
  int status = exit_ok;
  for (const auto& replica : selection.files) {
    const std::string name = selection.session + " replica " + replica.replica + ": ";
    if (report(name, session::verify_replica(replica), key_file, true) != exit_ok)
      status = exit_failure;
  }
  return status;
}

int run_log(log_options o) {
  if (o.json) o.format = "jsonl";
  const auto dir = log_dir_or_default(o.log_dir);
  const auto selection = session::find_log(dir, o.which);
  if (!selection) {
    std::cerr << "broker: no audit log "
              << (o.which.empty() ? "in " + dir.string() : "for " + o.which) << "\n";
    return exit_failure;
  }
  if (o.verify) return verify(*selection, o.key);
  if (selection->single_file()) {
    const auto& file = selection->files.front().files.front().path;
    if (!std::ifstream(file)) {
      std::cerr << "broker: cannot read " << file.string() << "\n";
      return exit_failure;
    }
  }
  session::merged_log log(selection->files);
  session::ocsf_mapper ocsf;
  print_lines(log, o, ocsf);
  if (!o.follow) return exit_ok;
  std::signal(SIGINT, [](int) { stop_following = 1; });
  while (!log.ended() && !stop_following) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    // A session's listing is taken again: a replica's next generation, or a new replica, is
    // read from once it appears (a file named by path is just that file).
    if (!selection->session.empty()) log.update(session::session_files(dir, selection->session));
    print_lines(log, o, ocsf);
  }
  return exit_ok;
}

}  // namespace

void register_log(CLI::App& root, int& exit_status) {
  auto options = std::make_shared<log_options>();
  auto* app = root.add_subcommand("log", "Show a session's audit log (default: the newest)");
  add_log_dir_option(*app, options->log_dir);
  app->add_option(
      "session", options->which,
      "Session id (every file of every replica, merged in time order) or log file path");
  app->add_flag("--json", options->json, "Print the raw JSONL records (--format jsonl)");
  app->add_option("--format", options->format,
                  "text (for people, the default), jsonl (the records as written) or ocsf (one "
                  "OCSF 1.8.0 HTTP Activity event per record, for a SIEM)")
      ->check(CLI::IsMember({"text", "jsonl", "ocsf"}))
      ->excludes("--json");
  app->add_flag("--verify", options->verify,
                "Check the hash chain (each replica's, across its files) and the session_end "
                "signature: ok (exit 0), tampered at seq N, truncated at seq N (a partial last "
                "record), unsigned or incomplete (exit 1)");
  app->add_option("--key", options->key,
                  "With --verify: the audit key (PEM, private or public) the signature must be "
                  "made with (default: ~/.config/broker/audit-key)");
  app->add_flag("--follow,-f", options->follow,
                "Keep printing records (from the newest files) until the session ends");
  app->callback([options, &exit_status] { exit_status = run_log(*options); });
}

}  // namespace broker::cli
