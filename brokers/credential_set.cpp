// A session's credentials: loading them from the policy layers into their families' brokers,
// what the child sees (dummies) and what responses are scrubbed of (real values). The
// per-request decision is in credential_set_apply.cpp, the plan in request_plan.cpp.
#include "brokers/credential_set.hpp"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <stdexcept>

#include "brokers/aws_broker.hpp"
#include "brokers/credential_set_catalog.hpp"
#include "brokers/dummy.hpp"
#include "brokers/dummy_key.hpp"
#include "brokers/github_app.hpp"
#include "brokers/login_file.hpp"
#include "brokers/minted_records.hpp"
#include "brokers/secret_source.hpp"
#include "brokers/value_broker.hpp"

namespace broker::brokers {
namespace {

// Shorter real values are not brokered: every response byte run and request field equal to them
// would be rewritten or refused ("abc" is everywhere), and they are no secret worth a canary.
constexpr std::size_t min_secret_size = 8;

bool is_token_family(std::string_view type) {
  return type == "gcp" || type == "azure";
}

std::string too_short(const std::string& source) {
  return "the value in " + source + " is shorter than " + std::to_string(min_secret_size) +
         " bytes";
}

struct layered_spec {
  const config::credential_spec* spec;  // from the first layer that defines the name
  const std::string* layer;             // that layer's source, for errors
  request_broker::layer_bindings other_layers;
};

// The broker for one credential, or null with `why` set when its source has no usable value.
std::unique_ptr<request_broker> load_broker(layered_spec& s, const provider_transport& transport,
                                            bool login_files,
                                            const std::shared_ptr<const stable_dummies>& stable,
                                            std::string& why) {
  const config::credential_spec& spec = *s.spec;
  if (spec.login_file) {
    if (!login_files) {
      why = "its login file is brokered only in wrap's netns mode (the child sees the file)";
      return nullptr;
    }
    const char* home = std::getenv("HOME");
    return make_login_file_broker(spec, std::move(s.other_layers), home ? home : "", why, stable);
  }
  if (spec.type == "github-app")
    return make_github_app_broker(spec, std::move(s.other_layers), transport, default_minted_dir(),
                                  why);
  if (is_token_family(spec.type)) {
    auto fetch = make_token_fetcher(spec, transport);
    if (!fetch) {
      why = "no value in " + spec.source;
      return nullptr;
    }
    return std::make_unique<token_broker>(spec, std::move(s.other_layers), std::move(*fetch));
  }
  if (spec.type == "aws-sigv4") {
    std::optional<aws_credentials> creds = load_aws_credentials(spec.source, spec.env);
    if (!creds) {
      why = "no value in " + spec.source;
      return nullptr;
    }
    auto broker = make_aws_broker(spec, std::move(*creds), std::move(s.other_layers),
                                  min_secret_size, stable.get(), transport);
    if (!broker) why = too_short(spec.source);
    return broker;
  }
  std::optional<base::secret> value = load_secret(spec.source);
  if (!value) {
    why = "no value in " + spec.source;
    return nullptr;
  }
  if (value->size() < min_secret_size) {
    why = too_short(spec.source);
    return nullptr;
  }
  std::string dummy = stable ? stable->dummy(*value, spec.name, "value") : make_dummy(*value);
  return make_value_broker({spec, std::move(*value), std::move(dummy), std::move(s.other_layers)});
}

}  // namespace

credential_set::credential_set(std::vector<std::unique_ptr<request_broker>> brokers)
    : brokers_(std::move(brokers)) {
  for (std::size_t i = 0; i < brokers_.size(); ++i) {
    for (const scrub_pattern& p : brokers_[i]->values().reals) response_patterns_.push_back(p);
    if (!brokers_[i]->mints().empty()) minting_.push_back(i);
  }
  catalog_values();
  find_stand_ins();
}

void credential_set::find_stand_ins() {
  for (std::size_t t = 0; t < brokers_.size(); ++t) {
    const auto* tool = dynamic_cast<const value_broker*>(brokers_[t].get());
    if (!tool || !tool->spec().mcp_tools) continue;
    for (std::size_t b = 0; b < brokers_.size(); ++b) {
      const auto* base = dynamic_cast<const value_broker*>(brokers_[b].get());
      if (!base || b == t || base->spec().mcp_tools || base->spec().type != tool->spec().type)
        continue;
      const auto& names = base->spec().env;
      const bool shares =
          std::any_of(tool->spec().env.begin(), tool->spec().env.end(), [&](const std::string& v) {
            return std::find(names.begin(), names.end(), v) != names.end();
          });
      if (!shares) continue;
      stand_ins_.push_back({b, t, tool->standing_in_for(*base)});
      break;
    }
  }
}

credential_set::credential_set() = default;
credential_set::~credential_set() = default;
credential_set::credential_set(credential_set&&) noexcept = default;
credential_set& credential_set::operator=(credential_set&&) noexcept = default;

credential_set credential_set::load(const std::vector<config::policy>& layers,
                                    std::vector<std::string>* skipped,
                                    const provider_transport& transport, bool login_files,
                                    std::shared_ptr<const stable_dummies> stable) {
  std::vector<layered_spec> specs;
  std::map<std::string, std::size_t, std::less<>> by_name;
  for (const config::policy& layer : layers) {
    for (const auto& [name, spec] : layer.credentials) {
      auto [it, added] = by_name.try_emplace(name, specs.size());
      if (added) {
        specs.push_back({&spec, &layer.source, {}});
        continue;
      }
      layered_spec& first = specs[it->second];
      if (first.spec->type != spec.type)
        throw std::invalid_argument("credential \"" + name + "\" is type \"" + first.spec->type +
                                    "\" in " + *first.layer + " but \"" + spec.type + "\" in " +
                                    layer.source);
      // A later layer can only narrow the binding and the scope.
      first.other_layers.hosts.push_back(spec.hosts);
      if (spec.scope) first.other_layers.scopes.push_back(*spec.scope);
    }
  }

  std::vector<std::unique_ptr<request_broker>> brokers;
  for (layered_spec& s : specs) {
    std::string why;
    if (auto broker = load_broker(s, transport, login_files, stable, why))
      brokers.push_back(std::move(broker));
    else if (skipped)
      skipped->push_back(s.spec->name + ": " + why);
  }
  return credential_set(std::move(brokers));
}

credential_set credential_set::for_session(std::string_view seed,
                                           const std::vector<config::policy>& narrowing) const {
  const dummy_seed dummies(seed);
  std::vector<std::unique_ptr<request_broker>> brokers;
  brokers.reserve(brokers_.size());
  for (const auto& b : brokers_) {
    brokers.push_back(b->for_session(dummies));
    for (const config::policy& layer : narrowing)
      if (auto it = layer.credentials.find(b->name()); it != layer.credentials.end())
        brokers.back()->narrow(it->second);
  }
  return credential_set(std::move(brokers));
}

std::vector<dummy_variable> credential_set::dummy_variables() const {
  std::vector<dummy_variable> all, vars;
  // A credential with "mcp_tools" takes a variable only when no other names it: sharing one, it
  // stands in for the other (find_stand_ins).
  for (const bool tools : {false, true})
    for (const auto& b : brokers_)
      if (b->spec().mcp_tools.has_value() == tools) b->dummy_variables(all);
  for (auto& v : all) {
    bool taken = false;  // two credentials naming one variable: the first one keeps it
    for (const auto& kept : vars) taken = taken || kept.name == v.name;
    if (!taken) vars.push_back(std::move(v));
  }
  return vars;
}

std::vector<std::pair<std::string, std::string>> credential_set::dummy_environment() const {
  std::vector<std::pair<std::string, std::string>> env;
  for (auto& v : dummy_variables()) env.emplace_back(std::move(v.name), std::move(v.value));
  return env;
}

std::vector<dummy_file> credential_set::dummy_files() const {
  std::vector<dummy_file> files;
  for (const auto& b : brokers_) b->dummy_files(files);
  return files;
}

std::vector<std::string> credential_set::displaced_variables() const {
  std::vector<std::string> all, out;
  for (const auto& b : brokers_) b->displaced_variables(all);
  for (auto& name : all)
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(std::move(name));
  return out;
}

std::vector<minted_info> credential_set::minted() const {
  std::vector<minted_info> out;
  for (std::size_t i : minting_)
    if (auto until = brokers_[i]->minted_until())
      out.push_back({brokers_[i]->name(), std::string(brokers_[i]->mints()), *until});
  return out;
}

std::optional<std::chrono::system_clock::time_point> credential_set::minted_until(
    std::string_view credential) const {
  for (std::size_t i : minting_)
    if (brokers_[i]->name() == credential) return brokers_[i]->minted_until();
  return std::nullopt;
}

std::vector<std::string> credential_set::names() const {
  std::vector<std::string> out;
  for (const auto& b : brokers_)
    if (std::find(out.begin(), out.end(), b->name()) == out.end()) out.push_back(b->name());
  return out;
}

std::vector<scrub_pattern> credential_set::response_patterns() const {
  std::vector<scrub_pattern> patterns = response_patterns_;
  const auto now = std::chrono::system_clock::now();
  for (const auto& b : brokers_) b->rotated_values(now, patterns);
  return patterns;
}

}  // namespace broker::brokers
