#include "live/session_setup.hpp"

#include <spdlog/spdlog.h>
#include <sys/prctl.h>

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#include "brokers/dummy_key.hpp"
#include "brokers/secret_source.hpp"
#include "config/approved_file.hpp"
#include "live/token_client.hpp"
#include "session/audit_files.hpp"
#include "session/audit_key.hpp"
#include "session/log.hpp"
#include "session/log_reader.hpp"

namespace broker::live {

std::vector<config::policy> load_layers(const std::vector<std::string>& files) {
  std::vector<config::policy> layers;
  std::error_code ec;
  if (std::filesystem::exists(team_policy_path, ec))
    layers.push_back(config::load_policy_file(team_policy_path));
  for (const auto& f : files) layers.push_back(config::load_policy_file(f));
  if (layers.empty())
    layers.push_back(config::parse_policy(config::default_policy_text(), "<default>"));
  return layers;
}

std::filesystem::path log_dir_or_default(const std::string& log_dir) {
  return log_dir.empty() ? session::default_log_dir() : std::filesystem::path(log_dir);
}

std::vector<connect_to_rule> parse_connect_to_rules(const std::vector<std::string>& specs) {
  std::vector<connect_to_rule> rules;
  for (const auto& s : specs) rules.push_back(parse_connect_to(s));
  return rules;
}

void check_upstream_cas(const std::vector<std::string>& files) {
  for (const auto& f : files) {
    std::ifstream in(f);
    if (!in) throw std::invalid_argument("--upstream-ca " + f + ": cannot read the file");
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (text.find("-----BEGIN CERTIFICATE-----") == std::string::npos)
      throw std::invalid_argument("--upstream-ca " + f + ": no PEM certificate in the file");
  }
}

bool prepare_asking(std::vector<config::policy>& layers, bool ask_on_deny,
                    std::filesystem::path* approved_file) {
  if (ask_on_deny) config::ask_on_every_layer(layers);
  if (!config::session_asks(layers)) return false;
  if (!approved_file) return true;
  *approved_file = config::default_approved_path();
  if (!approved_file->empty())
    if (auto approved = config::load_approved(*approved_file))
      config::add_approved_rules(layers, *approved);
  return true;
}

session_setup load_options_and_policy(const common_options& common,
                                      const std::vector<std::string>& timeouts,
                                      const std::string& session_name, bool ask_on_deny,
                                      bool use_approved_file) {
  session_setup s;
  if (!session_name.empty() && !session::valid_session_name(session_name))
    throw std::invalid_argument("--session " + session_name +
                                ": use 1-64 letters, digits, '.', '_' or '-'");
  s.options.connect_to = parse_connect_to_rules(common.connect_to);
  check_upstream_cas(common.upstream_cas);
  for (const auto& spec : timeouts) set_timeout(s.options.timeouts, spec);
  for (const auto& f : common.upstream_cas) s.options.upstream_cas.emplace_back(f);
  auto layers = load_layers(common.policies);
  s.asks = prepare_asking(layers, ask_on_deny, use_approved_file ? &s.approved_file : nullptr);
  s.policy = std::make_shared<config::policy_set>(std::move(layers));
  s.options.session_id = session_name.empty() ? session::new_session_id() : session_name;
  s.budget = std::make_shared<session::session_budget>(session::tightest(s.policy->layers()),
                                                       std::chrono::steady_clock::now());
  return s;
}

void load_credentials(session_setup& setup, bool login_files, bool user_dummies) {
  // Nothing of this process (its memory, its environment) is readable by a same-user debugger
  // or /proc reader once it holds real values.
  ::prctl(PR_SET_DUMPABLE, 0);
  std::vector<std::string> skipped;
  setup.credentials = std::make_shared<brokers::credential_set>(brokers::credential_set::load(
      setup.policy->layers(), &skipped,
      make_provider_transport(setup.options.connect_to, setup.options.upstream_cas), login_files,
      user_dummies
          ? std::make_shared<const brokers::stable_dummies>(brokers::default_dummy_key_path())
          : nullptr));
  for (const auto& layer : setup.policy->layers())
    for (const auto& [name, spec] : layer.credentials) {
      brokers::forget_environment_source(spec.source);
      // An AWS environment source is all of its variables (key id, secret, session token).
      if (spec.type == "aws-sigv4" && spec.source.starts_with("env:"))
        for (const auto& variable : spec.env) brokers::forget_environment_source("env:" + variable);
    }
  for (const auto& why : skipped)
    session::log(spdlog::level::info, session::log_tag(setup.options.session_id),
                 "credential {} (not brokered)", why);
}

std::unique_ptr<session::audit_log> open_audit(const common_options& common,
                                               const std::string& session_id,
                                               const std::string& replica) {
  session::audit_log_options options;
  options.rotation = common.audit_rotation;
  options.sync = common.audit_sync;
  options.replica = replica;
  auto audit =
      session::audit_log::open(log_dir_or_default(common.log_dir), session_id, std::move(options));
  if (audit->failed()) {
    session::log(spdlog::level::err, session::log_tag(session_id),
                 "audit log unavailable ({}): every request will be refused", audit->failure());
    return audit;
  }
  // The session_end record is signed with the user's audit key (docs/audit-log.md); without one the
  // chain still holds, and `broker log --verify` reports the log as unsigned.
  try {
    const auto key_path = session::default_audit_key_path();
    if (key_path.empty()) throw std::runtime_error("HOME is not set");
    audit->sign_with(
        std::make_shared<const session::audit_key>(session::audit_key::load_or_create(key_path)));
  } catch (const std::exception& e) {
    session::log(spdlog::level::warn, session::log_tag(session_id),
                 "the audit log will not be signed: {}", e.what());
  }
  return audit;
}

}  // namespace broker::live
