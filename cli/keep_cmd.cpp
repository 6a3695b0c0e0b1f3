// `broker keep SESSION PATH`: take in something `wrap` kept out of the host (DESIGN §8.1), and
// say so in the session's audit log.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "proxy/session_setup.hpp"
#include "session/audit_log.hpp"
#include "wrap/kept.hpp"

namespace broker::cli {

namespace {

struct keep_options {
  std::string log_dir;
  std::string session;
  std::string path;
};

// The session's last record's fields, for the session_end that closes the log again (its counts
// and exit stay what they were); the writer's own fields left out.
nlohmann::ordered_json last_end_fields(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  auto fields = nlohmann::ordered_json::parse(last, nullptr, false);
  if (!fields.is_object() || fields.value("event", "") != "session_end")
    return {{"event", "session_end"}};
  for (const char* reserved : {"ts", "session", "seq", "prev", "hash", "signature"})
    fields.erase(reserved);
  return fields;
}

int run_keep(const keep_options& o) {
  std::filesystem::path path = o.path;
  if (o.path.starts_with("~/")) {
    const char* home = std::getenv("HOME");
    path = std::string(home ? home : "") + o.path.substr(1);
  }
  path = std::filesystem::absolute(path).lexically_normal();
  common_options common;
  common.log_dir = o.log_dir;
  const auto log_dir = log_dir_or_default(o.log_dir);
  const auto kept_root = log_dir / (o.session + ".kept");
  if (o.session.empty() || o.session.find('/') != std::string::npos ||
      !std::filesystem::is_directory(kept_root)) {
    std::cerr << "broker: session " << o.session << " kept nothing out (no " << kept_root.string()
              << ")\n";
    return exit_usage;
  }
  const auto from = wrap::kept_path(kept_root, path);
  try {
    wrap::take_kept(kept_root, path);
  } catch (const std::exception& e) {
    std::cerr << "broker: " << e.what() << "\n";
    return 1;
  }
  auto audit = open_audit(common, o.session);
  const auto end = last_end_fields(audit->path());
  audit->write({{"event", "kept"}, {"path", path.string()}, {"from", from.string()}});
  audit->end(end);
  std::cout << "broker: " << path.string() << " taken in from " << from.string() << "\n";
  if (audit->failed()) {
    std::cerr << "broker: warning: the session's audit log could not record it ("
              << audit->failure() << ")\n";
    return 1;
  }
  return exit_ok;
}

}  // namespace

void register_keep(CLI::App& root, int& exit_status) {
  auto o = std::make_shared<keep_options>();
  auto* app = root.add_subcommand("keep", "Take in something wrap kept out of your home");
  app->add_option("--log-dir", o->log_dir, "Where the session's audit log is");
  app->add_option("session", o->session, "The session that kept it out")->required();
  app->add_option("path", o->path, "Where it would have gone (as wrap named it)")->required();
  app->callback([o, &exit_status] { exit_status = run_keep(*o); });
}

}  // namespace broker::cli
