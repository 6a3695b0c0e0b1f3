// `broker ca init|path|show [--ca-dir DIR]`: the persistent CA of `broker serve` (docs/cli.md).
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cctype>
#include <cstdlib>
#include <iostream>
#include <memory>

#include "certs/ca.hpp"
#include "cli/commands.hpp"
#include "cli/common.hpp"

namespace broker::cli {

namespace {

namespace fs = std::filesystem;
using certs::certificate_authority;

struct ca_options {
  std::string ca_dir;
  bool force = false;
};

fs::path ca_dir_or_default(const std::string& ca_dir) {
  if (!ca_dir.empty()) return ca_dir;
  auto dir = certs::default_ca_dir();
  if (dir.empty()) {
    throw certs::ca_error(
        "cannot locate the CA directory: neither XDG_CONFIG_HOME nor HOME is an absolute path; "
        "pass --ca-dir");
  }
  return dir;
}

// lstat, not exists(): a dangling symlink still occupies the name.
bool present(const fs::path& file) {
  struct stat st {};
  return ::lstat(file.c_str(), &st) == 0;
}

// "broker CA user@host": tells this CA apart from other machines' in a trust store listing.
std::string default_common_name() {
  std::string who;
  if (const char* user = std::getenv("USER")) who = user;
  std::array<char, 256> host{};
  if (::gethostname(host.data(), host.size() - 1) == 0 && host[0] != '\0')
    who += (who.empty() ? "" : "@") + std::string(host.data());
  std::string name = "broker CA";
  std::string safe;
  for (char c : who) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) != 0 || c == '.' || c == '-' || c == '_' || c == '@') safe += c;
  }
  if (!safe.empty()) name += " " + safe;
  return name.substr(0, 64);
}

int no_ca(const fs::path& dir) {
  std::cerr << "broker: no CA in " << dir.string() << "; run `broker ca init`\n";
  return exit_failure;
}

int run_init(const ca_options& options) {
  const auto dir = ca_dir_or_default(options.ca_dir);
  const auto key = certificate_authority::key_path(dir);
  const bool replacing = present(key);
  if (replacing && !options.force) {
    std::cerr << "broker: " << key.string()
              << " already exists; pass --force to replace the CA (clients trusting it would "
                 "then need the new certificate)\n";
    return exit_failure;
  }
  const auto ca = certificate_authority::generate(default_common_name());
  ca.save(dir);
  if (replacing) std::cerr << "broker: replaced the CA in " << dir.string() << "\n";
  std::cout << "certificate: " << certificate_authority::cert_path(dir).string() << "\n"
            << "fingerprint: " << ca.fingerprint() << "\n";
  return exit_ok;
}

int run_path(const ca_options& options) {
  const auto dir = ca_dir_or_default(options.ca_dir);
  const auto cert = certificate_authority::cert_path(dir);
  std::error_code ec;
  if (!fs::is_regular_file(cert, ec)) return no_ca(dir);
  std::cout << cert.string() << "\n";
  return exit_ok;
}

int run_show(const ca_options& options) {
  const auto dir = ca_dir_or_default(options.ca_dir);
  const auto cert = certificate_authority::cert_path(dir);
  if (!present(cert) && !present(certificate_authority::key_path(dir))) return no_ca(dir);
  // Through load(), so an unsafe key file or a mismatched pair is reported here too.
  const auto ca = certificate_authority::load(dir);
  std::cout << "subject:     " << ca.subject() << "\n"
            << "fingerprint: " << ca.fingerprint() << "\n"
            << "not after:   " << ca.not_after() << "\n"
            << "path:        " << cert.string() << "\n";
  return exit_ok;
}

int reporting_errors(int (*run)(const ca_options&), const ca_options& options) {
  try {
    return run(options);
  } catch (const std::exception& e) {
    std::cerr << "broker: " << e.what() << "\n";
    return exit_failure;
  }
}

void add_ca_dir_option(CLI::App& app, std::string& ca_dir) {
  app.add_option("--ca-dir", ca_dir, "CA directory (default $XDG_CONFIG_HOME/broker/ca)");
}

}  // namespace

void register_ca(CLI::App& root, int& exit_status) {
  auto* app = root.add_subcommand("ca", "Create or inspect the persistent CA of `broker serve`");
  app->require_subcommand(1);
  // One options object: exactly one of the subcommands runs.
  auto options = std::make_shared<ca_options>();

  auto* init = app->add_subcommand("init", "Create the CA; refuses to replace one without --force");
  add_ca_dir_option(*init, options->ca_dir);
  init->add_flag("--force", options->force, "Replace an existing CA");
  init->callback([options, &exit_status] { exit_status = reporting_errors(run_init, *options); });

  auto* path = app->add_subcommand("path", "Print the path of the CA certificate (ca.pem)");
  add_ca_dir_option(*path, options->ca_dir);
  path->callback([options, &exit_status] { exit_status = reporting_errors(run_path, *options); });

  auto* show = app->add_subcommand("show", "Print the CA's subject, fingerprint, expiry and path");
  add_ca_dir_option(*show, options->ca_dir);
  show->callback([options, &exit_status] { exit_status = reporting_errors(run_show, *options); });
}

}  // namespace broker::cli
