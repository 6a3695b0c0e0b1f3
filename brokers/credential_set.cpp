// A session's credentials: loading them from the policy layers, their bindings, what the child
// sees (dummies) and what responses are scrubbed of (real values). The per-request decision is
// in credential_set_apply.cpp.
#include "brokers/credential_set.hpp"

#include <map>
#include <stdexcept>

#include "brokers/dummy.hpp"
#include "brokers/secret_source.hpp"

namespace broker::brokers {
namespace {

// Shorter real values are not brokered: every response byte run and request field equal to them
// would be rewritten or refused ("abc" is everywhere), and they are no secret worth a canary.
constexpr std::size_t min_secret_size = 8;

bool has_broker(std::string_view type) {
  return type == "github" || type == "bearer" || type == "header" || type == "basic";
}

struct layered_spec {
  const config::credential_spec* spec;  // from the first layer that defines the name
  const std::string* layer;             // that layer's source, for errors
  std::vector<std::vector<config::host_pattern>> other_hosts;
};

}  // namespace

credential_set::credential_set(std::vector<credential> credentials) {
  credentials_.reserve(credentials.size());
  for (credential& c : credentials) {
    if (c.real.empty()) throw std::invalid_argument("credential " + c.spec.name + ": empty value");
    if (c.dummy.size() != c.real.size())
      throw std::invalid_argument("credential " + c.spec.name +
                                  ": dummy and real differ in length");
    auto owned = std::make_unique<credential>(std::move(c));
    owned->broker = make_broker(owned->spec, owned->dummy, owned->real.expose());
    credentials_.push_back(std::move(owned));
  }
  response_patterns_.reserve(credentials_.size());
  for (const auto& c : credentials_) response_patterns_.push_back({c->real.expose(), c->dummy});
}

credential_set credential_set::load(const std::vector<config::policy>& layers,
                                    std::vector<std::string>* skipped) {
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
      first.other_hosts.push_back(spec.hosts);  // a later layer can only narrow the binding
    }
  }

  auto skip = [&](const std::string& name, const std::string& reason) {
    if (skipped) skipped->push_back(name + ": " + reason);
  };
  std::vector<credential> loaded;
  for (layered_spec& s : specs) {
    const config::credential_spec& spec = *s.spec;
    if (!has_broker(spec.type)) {
      skip(spec.name, "not brokered yet");
      continue;
    }
    std::optional<secret> value = load_secret(spec.source);
    if (!value) {
      skip(spec.name, "no value in " + spec.source);
      continue;
    }
    if (value->size() < min_secret_size) {
      skip(spec.name, "the value in " + spec.source + " is shorter than " +
                          std::to_string(min_secret_size) + " bytes");
      continue;
    }
    credential c;
    c.spec = spec;
    c.dummy = make_dummy(*value);
    c.real = std::move(*value);
    c.other_layer_hosts = std::move(s.other_hosts);
    loaded.push_back(std::move(c));
  }
  return credential_set(std::move(loaded));
}

bool credential_set::bound(const credential& c, std::string_view host) {
  auto any_matches = [host](const std::vector<config::host_pattern>& hosts) {
    for (const config::host_pattern& p : hosts)
      if (p.matches(host)) return true;
    return false;
  };
  if (!any_matches(c.spec.hosts)) return false;
  for (const auto& hosts : c.other_layer_hosts)
    if (!any_matches(hosts)) return false;
  return true;
}

std::vector<std::pair<std::string, std::string>> credential_set::dummy_environment() const {
  std::vector<std::pair<std::string, std::string>> env;
  for (const auto& c : credentials_) {
    for (const std::string& name : c->spec.env) {
      bool taken = false;  // two credentials naming one variable: the first one keeps it
      for (const auto& [existing, value] : env) taken = taken || existing == name;
      if (!taken) env.emplace_back(name, c->dummy);
    }
  }
  return env;
}

}  // namespace broker::brokers
