// A session's credentials: loading them from the policy layers, their bindings, what the child
// sees (dummies) and what responses are scrubbed of (real values). The per-request decision is
// in credential_set_apply.cpp.
#include "brokers/credential_set.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>

#include "brokers/aws_credentials.hpp"
#include "brokers/credential_set_catalog.hpp"
#include "brokers/dummy.hpp"
#include "brokers/families.hpp"
#include "brokers/secret_source.hpp"

namespace broker::brokers {
namespace {

// Shorter real values are not brokered: every response byte run and request field equal to them
// would be rewritten or refused ("abc" is everywhere), and they are no secret worth a canary.
constexpr std::size_t min_secret_size = 8;

bool is_token_family(std::string_view type) {
  return type == "gcp" || type == "azure";
}

// The hosts where a gcp child's token requests go (google-auth, gcloud and older clients).
bool is_google_token_host(std::string_view host) {
  return host == "oauth2.googleapis.com" || host == "accounts.google.com" ||
         host == "www.googleapis.com";
}

std::string too_short(const std::string& source) {
  return "the value in " + source + " is shorter than " + std::to_string(min_secret_size) +
         " bytes";
}

credential make_credential(const config::credential_spec& spec, secret value,
                           std::vector<std::vector<config::host_pattern>> other_hosts) {
  credential c;
  c.spec = spec;
  c.dummy = make_dummy(value);
  c.real = std::move(value);
  c.other_layer_hosts = std::move(other_hosts);
  return c;
}

// An aws-sigv4 credential as its two or three parts, each with its own variable; false (nothing
// added) when a part is too short to broker.
bool add_aws_parts(const config::credential_spec& spec, aws_credentials creds,
                   const std::vector<std::vector<config::host_pattern>>& other_hosts,
                   std::vector<credential>& out) {
  std::vector<std::pair<credential_part, secret>> parts;
  parts.emplace_back(credential_part::aws_key_id, std::move(creds.access_key_id));
  parts.emplace_back(credential_part::aws_secret, std::move(creds.secret_access_key));
  if (!creds.session_token.empty() && spec.env.size() > 2)
    parts.emplace_back(credential_part::aws_token, std::move(creds.session_token));
  for (const auto& [part, value] : parts)
    if (value.size() < min_secret_size) return false;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    config::credential_spec part_spec = spec;
    part_spec.env = {spec.env[i]};
    out.push_back(make_credential(part_spec, std::move(parts[i].second), other_hosts));
    out.back().part = parts[i].first;
  }
  return true;
}

struct layered_spec {
  const config::credential_spec* spec;  // from the first layer that defines the name
  const std::string* layer;             // that layer's source, for errors
  std::vector<std::vector<config::host_pattern>> other_hosts;
};

// Temporary AWS credentials (a credential_process that says when they expire): the command is
// run again before they do. `parts` are the credential's entries just added (key id, secret,
// token): the first issue, and the dummies the new values' stand-ins are cut from.
std::unique_ptr<rotating<aws_real_credentials>> rotate_aws(
    const config::credential_spec& spec, const credential* parts, std::size_t count,
    std::chrono::system_clock::time_point expires) {
  const std::string dummy_key_id = parts[0].dummy, dummy_secret = parts[1].dummy;
  const std::string dummy_token = count > 2 ? parts[2].dummy : dummy_secret;
  auto issue = [=](aws_credentials c) {
    aws_real_credentials r;
    r.key_id_mask = same_length_mask(dummy_key_id, c.access_key_id.size());
    r.secret_mask = same_length_mask(dummy_secret, c.secret_access_key.size());
    r.token_mask = same_length_mask(dummy_token, c.session_token.size());
    r.key_id = std::move(c.access_key_id);
    r.secret_key = std::move(c.secret_access_key);
    r.token = std::move(c.session_token);
    r.expires = c.expiration.value_or(std::chrono::system_clock::now() + std::chrono::hours(1));
    return r;
  };
  aws_credentials first;
  first.access_key_id = secret(std::string(parts[0].real.expose()));
  first.secret_access_key = secret(std::string(parts[1].real.expose()));
  if (count > 2) first.session_token = secret(std::string(parts[2].real.expose()));
  first.expiration = expires;
  return std::make_unique<rotating<aws_real_credentials>>(
      "credential " + spec.name + ": its temporary AWS credentials", issue(std::move(first)),
      std::chrono::system_clock::now(), [spec, issue] {
        std::optional<aws_credentials> next = load_aws_credentials(spec.source, spec.env);
        if (!next) throw source_error(spec.source + ": no credentials");
        return issue(std::move(*next));
      });
}

}  // namespace

credential_set::credential_set(std::vector<credential> credentials,
                               std::vector<std::unique_ptr<token_credential>> tokens,
                               aws_rotation_list aws_rotations)
    : tokens_(std::move(tokens)), aws_rotations_(std::move(aws_rotations)) {
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
  catalog_values();
  response_patterns_.reserve(credentials_.size());
  for (const auto& c : credentials_) response_patterns_.push_back({c->real.expose(), c->dummy});
  for (const auto& c : credentials_) {
    if (c->part != credential_part::aws_key_id) continue;
    aws_identity id{c->spec.name, c->dummy,         c->real.expose(), {}, {}, {},
                    {},           &c->spec.regions, &c->spec.services};
    for (const auto& other : credentials_) {
      if (other->spec.name != c->spec.name) continue;
      if (other->part == credential_part::aws_secret) {
        id.dummy_secret = other->dummy;
        id.real_secret = other->real.expose();
      } else if (other->part == credential_part::aws_token) {
        id.dummy_token = other->dummy;
        id.real_token = other->real.expose();
      }
    }
    for (const auto& [name, rotation] : aws_rotations_)
      if (name == c->spec.name) id.rotation = rotation.get();
    if (id.real_secret.empty())
      throw std::invalid_argument("credential " + c->spec.name +
                                  ": an AWS key id without a secret");
    aws_.push_back(id);
  }
}

credential_set::credential_set() = default;
credential_set::~credential_set() = default;
credential_set::credential_set(credential_set&&) noexcept = default;
credential_set& credential_set::operator=(credential_set&&) noexcept = default;

credential_set credential_set::load(const std::vector<config::policy>& layers,
                                    std::vector<std::string>* skipped,
                                    const token_transport& transport) {
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
  std::vector<std::unique_ptr<token_credential>> tokens;
  aws_rotation_list aws_rotations;
  for (layered_spec& s : specs) {
    const config::credential_spec& spec = *s.spec;
    if (is_token_family(spec.type)) {
      auto fetch = make_token_fetcher(spec, transport);
      if (!fetch)
        skip(spec.name, "no value in " + spec.source);
      else
        tokens.push_back(
            std::make_unique<token_credential>(spec, std::move(s.other_hosts), std::move(*fetch)));
      continue;
    }
    if (spec.type == "aws-sigv4") {
      std::optional<aws_credentials> creds = load_aws_credentials(spec.source, spec.env);
      const std::size_t first_part = loaded.size();
      const auto expiration = creds ? creds->expiration : std::nullopt;
      if (!creds)
        skip(spec.name, "no value in " + spec.source);
      else if (!add_aws_parts(spec, std::move(*creds), s.other_hosts, loaded))
        skip(spec.name, too_short(spec.source));
      else if (expiration)
        aws_rotations.emplace_back(spec.name, rotate_aws(spec, &loaded[first_part],
                                                         loaded.size() - first_part, *expiration));
      continue;
    }
    std::optional<secret> value = load_secret(spec.source);
    if (!value) {
      skip(spec.name, "no value in " + spec.source);
      continue;
    }
    if (value->size() < min_secret_size) {
      skip(spec.name, too_short(spec.source));
      continue;
    }
    loaded.push_back(make_credential(spec, std::move(*value), std::move(s.other_hosts)));
  }
  return credential_set(std::move(loaded), std::move(tokens), std::move(aws_rotations));
}

bool credential_set::bound(const credential& c, std::string_view host) {
  return bound(c.spec, c.other_layer_hosts, host);
}

bool credential_set::bound(const config::credential_spec& spec,
                           const std::vector<std::vector<config::host_pattern>>& other_layer_hosts,
                           std::string_view host) {
  auto any_matches = [host](const std::vector<config::host_pattern>& hosts) {
    for (const config::host_pattern& p : hosts)
      if (p.matches(host)) return true;
    return false;
  };
  if (!any_matches(spec.hosts)) return false;
  for (const auto& hosts : other_layer_hosts)
    if (!any_matches(hosts)) return false;
  return true;
}

std::vector<credential_set::dummy_variable> credential_set::dummy_variables() const {
  std::vector<dummy_variable> vars;
  auto add = [&vars](const std::string& name, const std::string& value,
                     const std::string& credential) {
    bool taken = false;  // two credentials naming one variable: the first one keeps it
    for (const auto& v : vars) taken = taken || v.name == name;
    if (!taken) vars.push_back({name, value, credential});
  };
  for (const auto& c : credentials_)
    for (const std::string& name : c->spec.env) add(name, c->dummy, c->spec.name);
  for (const auto& t : tokens_) {
    if (t->spec().type == "gcp") {
      // Its variable names the key file (dummy_files); gcloud takes a token from this one.
      add("CLOUDSDK_AUTH_ACCESS_TOKEN", t->dummy(), t->spec().name);
      continue;
    }
    for (const std::string& name : t->spec().env) add(name, t->dummy(), t->spec().name);
  }
  return vars;
}

std::vector<std::pair<std::string, std::string>> credential_set::dummy_environment() const {
  std::vector<std::pair<std::string, std::string>> env;
  for (auto& v : dummy_variables()) env.emplace_back(std::move(v.name), std::move(v.value));
  return env;
}

std::vector<credential_set::dummy_file> credential_set::dummy_files() const {
  std::vector<dummy_file> files;
  for (const auto& t : tokens_)
    if (t->spec().type == "gcp" && !t->spec().env.empty())
      files.push_back({t->spec().env.front(), "gcp-" + t->spec().name + ".json", t->gcp_key_file(),
                       t->spec().name});
  return files;
}

std::vector<std::string> credential_set::displaced_variables() const {
  if (aws_.empty()) return {};
  return {"AWS_PROFILE", "AWS_DEFAULT_PROFILE"};
}

std::vector<std::string> credential_set::names() const {
  std::vector<std::string> out;
  auto add = [&out](const std::string& name) {
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
  };
  for (const auto& c : credentials_) add(c->spec.name);
  for (const auto& t : tokens_) add(t->spec().name);
  return out;
}

std::vector<scrub_pattern> credential_set::response_patterns() const {
  std::vector<scrub_pattern> patterns = response_patterns_;
  const auto now = std::chrono::system_clock::now();
  for (const auto& t : tokens_) {
    for (const issued_token* issued : t->live(now))
      patterns.push_back({issued->token.expose(), issued->mask});
  }
  for (const auto& [name, rotation] : aws_rotations_) {
    for (const aws_real_credentials* c : rotation->live(now)) {
      patterns.push_back({c->key_id.expose(), c->key_id_mask});
      patterns.push_back({c->secret_key.expose(), c->secret_mask});
      if (!c->token.empty()) patterns.push_back({c->token.expose(), c->token_mask});
    }
  }
  return patterns;
}

std::vector<std::pair<std::string_view, std::string_view>> credential_set::rotated_values(
    std::chrono::system_clock::time_point now) const {
  std::vector<std::pair<std::string_view, std::string_view>> values;
  for (const auto& t : tokens_)
    for (const issued_token* issued : t->live(now))
      values.emplace_back(issued->token.expose(), t->spec().name);
  for (const auto& [name, rotation] : aws_rotations_) {
    for (const aws_real_credentials* c : rotation->live(now)) {
      values.emplace_back(c->key_id.expose(), name);
      values.emplace_back(c->secret_key.expose(), name);
      if (!c->token.empty()) values.emplace_back(c->token.expose(), name);
    }
  }
  return values;
}

bool credential_set::may_be_gcp_token_request(std::string_view host,
                                              std::string_view method) const {
  if (method != "POST" || !is_google_token_host(host)) return false;
  for (const auto& t : tokens_)
    if (t->spec().type == "gcp") return true;
  return false;
}

std::optional<credential_set::token_answer> credential_set::gcp_token_answer(
    std::string_view host, std::string_view method, std::string_view form) const {
  if (!may_be_gcp_token_request(host, method)) return std::nullopt;
  for (const auto& t : tokens_) {
    if (t->spec().type != "gcp") continue;
    // The form's refresh_token parameter, decoded, is this session's dummy.
    if (form_value(form, "refresh_token") == t->gcp_client().refresh_token)
      return token_answer{t->spec().name, t->gcp_token_answer()};
  }
  return std::nullopt;
}

}  // namespace broker::brokers
