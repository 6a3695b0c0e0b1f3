// github-app: installation tokens minted per session from the App's key (github_app.hpp).
#include "brokers/github_app.hpp"

#include <spdlog/spdlog.h>

#include <ctime>
#include <mutex>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "brokers/dummy.hpp"
#include "brokers/families.hpp"
#include "brokers/jws.hpp"
#include "brokers/minted_records.hpp"
#include "brokers/provider_text.hpp"
#include "brokers/rotating.hpp"
#include "brokers/secret_source.hpp"
#include "brokers/swapped_values.hpp"
#include "brokers/token_broker.hpp"

namespace broker::brokers {
namespace {

using clock = std::chrono::system_clock;

// An installation token's shape: "ghs_" and 36 base62 characters (the last six a CRC32).
const base::secret& token_shape() {
  static const base::secret shape(std::string("ghs_") + std::string(36, 'A'));
  return shape;
}

// How long a failed mint is not tried again: each request in that time gets the same refusal.
constexpr auto mint_backoff = std::chrono::seconds(10);

std::vector<std::pair<std::string, std::string>> github_headers(std::string authorization) {
  return {{"Authorization", std::move(authorization)},
          {"Accept", "application/vnd.github+json"},
          {"X-GitHub-Api-Version", "2022-11-28"},
          {"User-Agent", "broker"}};
}

// A session's minted tokens: none until the first request that needs one, then renewed ahead
// of each expiry; each one recorded until it is revoked.
class mint_state {
 public:
  mint_state(std::shared_ptr<const github_app_client> client, std::filesystem::path records,
             std::string credential)
      : client_(std::move(client)),
        records_dir_(std::move(records)),
        credential_(std::move(credential)),
        seal_key_(minted_seal_key(client_->private_key(), client_->issuer())) {}

  // Revokes every token it minted that GitHub may still honour.
  ~mint_state() {
    tokens_.reset();  // the renewer stops (a renewal under way finishes first)
    std::lock_guard lock(records_mutex_);
    for (auto& r : records_) {
      if (r->expires() <= clock::now()) {
        r->remove();
      } else if (client_->revoke(r->credential())) {
        r->remove();
      } else {
        spdlog::warn(
            "credential {}: a minted token could not be revoked; the next session of "
            "this App tries again",
            credential_);
      }
    }
  }

  // The current token, minted first if need be. Throws mint_error.
  const issued_token& current() {
    std::lock_guard lock(mutex_);
    if (!tokens_) {
      const auto now = clock::now();
      if (failed_ && now < failed_at_ + mint_backoff) throw *failed_;
      try {
        issued_token first = mint();
        tokens_ = std::make_unique<rotating<issued_token>>(
            "credential " + credential_ + ": its GitHub App installation token", std::move(first),
            now, [this] { return mint(); });
        failed_.reset();
      } catch (const mint_error& e) {
        failed_ = e;
        failed_at_ = now;
        throw;
      }
    }
    const issued_token& token = tokens_->current();
    if (token.expires <= clock::now())
      throw mint_error(0, "its minted token expired and renewing it failed (see the broker's log)");
    return token;
  }

  // The current token's expiry, once one was minted.
  std::optional<clock::time_point> expires() const {
    std::lock_guard lock(mutex_);
    if (!tokens_) return std::nullopt;
    return tokens_->current().expires;
  }
  std::vector<const issued_token*> live(clock::time_point now) const {
    std::lock_guard lock(mutex_);
    if (!tokens_) return {};
    return tokens_->live(now);
  }

 private:
  // One token from GitHub, recorded before anything uses it. On the renewer's thread too.
  issued_token mint() {
    github_app_client::minted m = client_->mint();
    issued_token token{std::move(m.token), m.expires};
    std::unique_ptr<minted_record> record;
    try {
      record = minted_record::write(records_dir_, client_->issuer(), seal_key_, token.token,
                                    token.expires);
    } catch (const std::exception& e) {
      // Unrecorded, a kill would leave it usable until it expires: it goes back at once.
      client_->revoke(token.token);
      throw mint_error(0, std::string("no record of the minted token could be kept (") + e.what() +
                              "), so it was revoked");
    }
    {
      std::lock_guard lock(records_mutex_);
      records_.push_back(std::move(record));
    }
    spdlog::info("credential {}: minted a GitHub App installation token, expiring at {}",
                 credential_, std::chrono::system_clock::to_time_t(token.expires));
    return token;
  }

  std::shared_ptr<const github_app_client> client_;
  std::filesystem::path records_dir_;
  std::string credential_;
  base::secret seal_key_;
  mutable std::mutex mutex_;  // the first mint, tokens_, failed_
  std::optional<mint_error> failed_;
  clock::time_point failed_at_{};
  std::mutex records_mutex_;
  std::vector<std::unique_ptr<minted_record>> records_;
  std::unique_ptr<rotating<issued_token>> tokens_;  // last: its renewer uses the rest
};

class github_app_broker;

// A request carrying the dummy in GitHub's forms: the current token swapped in when it
// completes (minted first if need be), or 502 credential_unavailable.
class github_app_step final : public request_step {
 public:
  explicit github_app_step(const github_app_broker& broker) : broker_(broker) {}
  bool holds_real() const override { return true; }
  request_decision complete(std::string_view method, std::string& target,
                            std::vector<http::header_field>& headers, std::string& body) override;
  void response_patterns(std::vector<scrub_pattern>& out) const override { swapped_.patterns(out); }

 private:
  const github_app_broker& broker_;
  swapped_values swapped_;
};

class github_app_broker final : public request_broker {
 public:
  github_app_broker(config::credential_spec spec, layer_bindings others,
                    std::shared_ptr<const github_app_client> client, std::filesystem::path records,
                    std::string dummy)
      : request_broker(std::move(spec), std::move(others)),
        client_(std::move(client)),
        records_(std::move(records)),
        dummy_(std::move(dummy)),
        masks_(dummy_),
        state_(std::make_unique<mint_state>(client_, records_, name())) {}

  std::unique_ptr<request_broker> for_session(const dummy_seed& seed) const override {
    return std::make_unique<github_app_broker>(spec(), other_layers(), client_, records_,
                                               seed.dummy(token_shape(), name(), "token"));
  }

  const std::string& dummy() const { return dummy_; }
  const issued_token& current() const { return state_->current(); }

  credential_values values() const override {
    credential_values v;
    v.dummies = {dummy_};
    return v;
  }
  bool rotates() const override { return true; }
  void rotated_values(clock::time_point now, std::vector<scrub_pattern>& out) const override {
    for (const issued_token* t : state_->live(now))
      out.push_back({t->token.expose(), masks_.of(t->token.size())});
  }
  std::string_view mints() const override { return "GitHub App installation token"; }
  std::optional<clock::time_point> minted_until() const override { return state_->expires(); }
  void dummy_variables(std::vector<dummy_variable>& out) const override {
    for (const auto& name : spec().env) out.push_back({name, dummy_, this->name()});
  }

  std::unique_ptr<request_step> claim(const request_context& where, std::string_view,
                                      std::string_view,
                                      const std::vector<http::header_field>& headers, bool,
                                      request_decision&) const override {
    if (!usable(where)) return nullptr;
    for (const auto& h : headers)
      if (is_authorization(h.name) && carries_github_token(h.value, dummy_))
        return std::make_unique<github_app_step>(*this);
    return nullptr;
  }

 private:
  std::shared_ptr<const github_app_client> client_;
  std::filesystem::path records_;
  std::string dummy_;
  dummy_masks masks_;
  std::unique_ptr<mint_state> state_;  // this session's tokens, revoked with it
};

request_decision github_app_step::complete(std::string_view, std::string&,
                                           std::vector<http::header_field>& headers, std::string&) {
  const std::string credential = broker_.name();
  const issued_token* token = nullptr;
  try {
    token = &broker_.current();
  } catch (const mint_error& e) {
    std::string why = e.what();
    if (e.status() > 0) why += " (GitHub answered " + std::to_string(e.status()) + ")";
    return {request_action::credential_unavailable, credential, std::move(why), 0};
  }
  int swapped = 0;
  for (auto& h : headers) {
    if (!is_authorization(h.name)) continue;
    const std::string sent = h.value;
    const int n = swap_github_authorization(h.value, broker_.dummy(), token->token.expose());
    if (n > 0) swapped_.add(h.value, sent);
    swapped += n;
  }
  return {request_action::pass, credential, "header authorization", swapped};
}

}  // namespace

github_app_client::github_app_client(config::github_app_spec app, base::secret private_key,
                                     provider_transport transport)
    : app_(std::move(app)),
      private_key_(std::move(private_key)),
      transport_(std::move(transport)) {}

std::string github_app_client::issuer() const {
  return "github-app " + app_.api_url + " " + app_.app_id + "/" + app_.installation_id;
}

std::string github_app_client::app_jwt(clock::time_point now) const {
  const auto at = std::chrono::floor<std::chrono::seconds>(now.time_since_epoch()).count();
  nlohmann::ordered_json claims;
  claims["iat"] = at - 60;
  claims["exp"] = at + 540;
  // The App's id as a number, as GitHub's own examples send it; a client id as text.
  const bool digits = app_.app_id.find_first_not_of("0123456789") == std::string::npos;
  if (digits)
    claims["iss"] = std::stoull(app_.app_id);
  else
    claims["iss"] = app_.app_id;
  return rs256_jws(private_key_.expose(), {{"alg", "RS256"}, {"typ", "JWT"}}, claims,
                   "GitHub App " + app_.app_id);
}

github_app_client::minted github_app_client::mint() const {
  nlohmann::ordered_json body = nlohmann::ordered_json::object();
  if (!app_.repositories.empty()) body["repositories"] = app_.repositories;
  if (!app_.permissions.empty()) {
    nlohmann::ordered_json permissions = nlohmann::ordered_json::object();
    for (const auto& [name, level] : app_.permissions) permissions[name] = level;
    body["permissions"] = std::move(permissions);
  }
  std::string jwt;
  try {
    jwt = app_jwt(clock::now());
  } catch (const source_error& e) {
    throw mint_error(0, e.what());
  }
  provider_request request{
      "POST", app_.api_url + "/app/installations/" + app_.installation_id + "/access_tokens",
      github_headers("Bearer " + jwt), body.dump()};
  request.headers.emplace_back("Content-Type", "application/json");
  base::wipe(jwt);
  provider_answer answer;
  try {
    answer = transport_(request);
  } catch (const std::exception& e) {
    base::wipe(request.headers.front().second);
    throw mint_error(0, std::string("GitHub could not be reached: ") + e.what());
  }
  base::wipe(request.headers.front().second);
  const auto doc = nlohmann::json::parse(answer.body, nullptr, false);
  base::wipe(answer.body);
  if (answer.status != 201) {
    std::string message = doc.is_object() && doc.contains("message") && doc["message"].is_string()
                              ? printable_excerpt(doc["message"].get<std::string>())
                              : "no message";
    throw mint_error(answer.status, "GitHub refused the installation token: " + message);
  }
  if (!doc.is_object() || !doc.contains("token") || !doc["token"].is_string() ||
      !doc.contains("expires_at") || !doc["expires_at"].is_string())
    throw mint_error(answer.status, "GitHub's answer holds no token and expiry");
  auto expires = parse_utc_time(doc["expires_at"].get<std::string>());
  if (!expires) throw mint_error(answer.status, "GitHub's answer has an unreadable expires_at");
  std::string token = doc["token"].get<std::string>();
  if (token.size() < 8) {
    base::wipe(token);
    throw mint_error(answer.status, "GitHub's token is too short to be one");
  }
  return {base::secret(std::move(token)), *expires};
}

bool github_app_client::revoke(const base::secret& token) const {
  provider_request request{"DELETE",
                           app_.api_url + "/installation/token",
                           github_headers("token " + std::string(token.expose())),
                           {}};
  bool gone = false;
  try {
    const provider_answer answer = transport_(request);
    gone = answer.status == 204 || answer.status == 401;
  } catch (const std::exception& e) {
    spdlog::warn("GitHub App {}: revoking a token failed: {}", app_.app_id, e.what());
  }
  base::wipe(request.headers.front().second);
  return gone;
}

std::unique_ptr<request_broker> make_github_app_broker(const config::credential_spec& spec,
                                                       request_broker::layer_bindings others,
                                                       provider_transport transport,
                                                       std::filesystem::path records,
                                                       std::string& why) {
  std::optional<base::secret> key = load_secret(spec.source);
  if (!key) {
    why = "no value in " + spec.source;
    return nullptr;
  }
  if (!transport) throw source_error(spec.source + ": no way to reach GitHub");
  auto client = std::make_shared<const github_app_client>(*spec.github_app, std::move(*key),
                                                          std::move(transport));
  (void)client->app_jwt(clock::now());  // a key that cannot sign fails the session's start
  const int revoked = revoke_left_records(
      records, client->issuer(), minted_seal_key(client->private_key(), client->issuer()),
      [&](const base::secret& token) { return client->revoke(token); });
  if (revoked > 0)
    spdlog::info("credential {}: revoked {} installation token(s) a dead session left", spec.name,
                 revoked);
  return std::make_unique<github_app_broker>(spec, std::move(others), std::move(client),
                                             std::move(records), make_dummy(token_shape()));
}

}  // namespace broker::brokers
