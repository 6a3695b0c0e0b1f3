// Access tokens that expire: the first fetched at session start, the next ones by a refresher
// thread ahead of expiry. Every token issued stays in memory until the session ends (a few an
// hour), so the views the scrubbers hold never dangle.
#include "brokers/token_broker.hpp"

#include <nlohmann/json.hpp>

#include "brokers/dummy.hpp"
#include "brokers/families.hpp"
#include "brokers/secret_source.hpp"

namespace broker::brokers {
namespace {

using std::chrono::system_clock;

constexpr std::string_view token_request_why =
    "a token request is read to see whether it redeems the session's dummy";

constexpr std::string_view default_gcp_scope = "https://www.googleapis.com/auth/cloud-platform";

// A random string of `example`'s public shape (its length and alphabet, brokers/dummy_shape.hpp),
// from the CSPRNG or, for a gateway's session, from its seed.
std::string shaped_like(std::string example, const dummy_seed* seed = nullptr,
                        std::string_view credential = {}, std::string_view field = {}) {
  const base::secret shape(std::move(example));
  return seed ? seed->dummy(shape, credential, field) : make_dummy(shape);
}

// Shapes of Google's own OAuth clients and refresh tokens, random but for their fixed parts. A
// client id is a project number, '-' and 32 of [a-z0-9]: each part drawn from its own alphabet.
gcp_dummy_client gcp_client_like_googles(const dummy_seed* seed, std::string_view credential) {
  gcp_dummy_client c;
  c.client_id = shaped_like("764086051850", seed, credential, "client id number") + "-" +
                shaped_like("6qr4p6gpi6hn506pt8ejuq83di341hur", seed, credential, "client id") +
                ".apps.googleusercontent.com";
  c.client_secret =
      "GOCSPX-" + shaped_like("d4FL95Q19q7MQmFpd7hHD0TyQm2x", seed, credential, "client secret");
  c.refresh_token = "1//0" + shaped_like(
                                 "gXk2Yb7Lr9QwCgYIARAAGBASNwF-"
                                 "L9IrQ3aPzT1mNuVxW8kJcD5sHfE2oRtY6bGqZiU0lMnKpA4vSxC7eWdJhB1yTf",
                                 seed, credential, "refresh token");
  return c;
}

// The shape of a session's dummy access token: what the family's tokens look like (a Google
// "ya29." token; an Entra ID JWT whose claims say only that it never runs out, 2100-01-01,
// since it stands for whichever real token is current), fixed so that every replica derives
// the same dummy whatever token it fetched.
std::string access_token_shape(std::string_view type) {
  if (type == "gcp")
    return "ya29.a0AfB_byC3kZ9mQ2xV7pLr4TnB8wYc1JdHs6Ke0Fa3GuVi5OnXq2Rt8MzWb4Ly7Pe1Hc9Dk3Sg6Jf0"
           "Na5Qu2Vx8Zo4Bi7Cm1Ew3Gy6Iz9Kt2Mv5Ox8Qr1Ts4Uw7Wy0Ya3Cd6Ef9Gh2Ij5Kl8Mn1Op4Qr7St0Uv3Wx"
           "6Yz9Ab2Cd5Ef8Gh1Ij4Kl7Mn0Op3Qr6St9Uv2Wx5Yz8Ab1Cd4Ef7Gh0Ij3Kl6Mn9Op2Qr5St8Uv1Wx4Yz7"
           "Ab0Cd3Ef6Gh9Ij0175";
  // {"typ":"JWT","alg":"RS256"} . {"exp":4102444800} . a 342-character RS256 signature
  std::string jwt = "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9.eyJleHAiOjQxMDI0NDQ4MDB9.";
  const std::size_t size = jwt.size() + 342;
  while (jwt.size() < size) jwt += "Qk7Zp2Qm_Xv9Lr4TnB8wYc1JdHs6Ke0Fa3GuVi5Ob-";
  jwt.resize(size);
  return jwt;
}

std::string scopes_of(const config::credential_spec& spec) {
  if (spec.scopes.empty()) return std::string(default_gcp_scope);
  std::string joined;
  for (const auto& s : spec.scopes) joined += (joined.empty() ? "" : " ") + s;
  return joined;
}

// A string field of a key file, moved into a secret (the json's copy is left empty).
base::secret take_field(nlohmann::json& doc, const char* key, const std::string& source) {
  auto it = doc.find(key);
  if (it == doc.end() || !it->is_string() || it->get_ref<std::string&>().empty())
    throw source_error(source + ": the key file has no \"" + key + "\"");
  return base::secret(std::move(it->get_ref<std::string&>()));
}

// A Google key file's token request: service_account → JWT bearer grant; authorized_user →
// refresh-token grant. Returns the form and the token endpoint.
std::pair<std::string, std::string> google_grant(const base::secret& key_file,
                                                 const std::string& scope,
                                                 const std::string& source) {
  nlohmann::json doc = nlohmann::json::parse(key_file.expose(), nullptr, false);
  if (!doc.is_object()) throw source_error(source + ": the key file is not JSON");
  const std::string type = doc.value("type", "");
  if (type == "service_account") {
    const service_account account = parse_service_account(key_file.expose());
    std::string assertion = jwt_bearer_assertion(account, scope, system_clock::now());
    std::string form = jwt_bearer_form(assertion);
    base::wipe(assertion);
    return {std::move(form), account.token_uri};
  }
  if (type == "authorized_user") {
    std::string token_uri = doc.value("token_uri", std::string(google_token_uri));
    const base::secret client_id = take_field(doc, "client_id", source);
    const base::secret client_secret = take_field(doc, "client_secret", source);
    const base::secret refresh_token = take_field(doc, "refresh_token", source);
    std::string form =
        "grant_type=refresh_token&client_id=" + base::percent_encode(client_id.expose()) +
        "&client_secret=" + base::percent_encode(client_secret.expose()) +
        "&refresh_token=" + base::percent_encode(refresh_token.expose());
    return {std::move(form), std::move(token_uri)};
  }
  throw source_error(source +
                     ": the key file's \"type\" is neither \"service_account\" nor "
                     "\"authorized_user\"");
}

// The hosts where a gcp child's token requests go (google-auth, gcloud and older clients).
bool is_google_token_host(std::string_view host) {
  return host == "oauth2.googleapis.com" || host == "accounts.google.com" ||
         host == "www.googleapis.com";
}

// A gcp child's request to Google's token endpoint: when its form redeems the session key
// file's refresh token, the broker answers it with the dummy access token.
class gcp_token_step final : public request_step {
 public:
  explicit gcp_token_step(const token_broker& credential) : credential_(credential) {}

  bool holds_real() const override { return false; }
  std::optional<whole_body_need> whole_body() const override {
    return whole_body_need{max_token_request, token_request_why, true};
  }
  request_decision complete(std::string_view, std::string&, std::vector<http::header_field>&,
                            std::string& body) override {
    // The form's refresh_token parameter, decoded, is this session's dummy.
    if (base::form_value(body, "refresh_token") != credential_.gcp_client().refresh_token)
      return {};
    answer_ = local_answer{credential_.name(), credential_.gcp_token_answer()};
    return {request_action::pass, credential_.name(), "body refresh_token", 0};
  }
  std::optional<local_answer> answer() const override { return answer_; }

 private:
  const token_broker& credential_;
  std::optional<local_answer> answer_;
};

// The token as issued: nothing of any session's dummy is in it.
issued_token issue_token(access_token token) {
  return {std::move(token.token), token.expires};
}

}  // namespace

token_broker::token_broker(config::credential_spec spec, layer_bindings other_layers, fetcher fetch)
    : request_broker(std::move(spec), std::move(other_layers)) {
  if (request_broker::spec().type == "gcp") gcp_client_ = gcp_client_like_googles(nullptr, {});
  const auto issued = system_clock::now();
  access_token first;
  try {
    first = fetch();
  } catch (const mint_error& e) {
    if (mints().empty()) throw;
    // Nothing to shape the dummy on: the family's shape.
    unavailable_ = e.what();
    if (e.status() > 0)
      unavailable_ += " (Google's STS answered " + std::to_string(e.status()) + ")";
    dummy_ = shaped_like(access_token_shape(request_broker::spec().type));
    masks_ = std::make_unique<const dummy_masks>(dummy_);
    return;
  }
  dummy_ = make_dummy(first.token);
  masks_ = std::make_unique<const dummy_masks>(dummy_);
  tokens_ = std::make_shared<const rotating<issued_token>>(
      "credential " + name() + ": its access token", issue_token(std::move(first)), issued,
      [fetch = std::move(fetch)] { return issue_token(fetch()); });
}

token_broker::token_broker(const token_broker& base, std::string dummy, gcp_dummy_client client)
    : request_broker(base.spec(), base.other_layers()),
      dummy_(std::move(dummy)),
      gcp_client_(std::move(client)),
      masks_(std::make_unique<const dummy_masks>(dummy_)),
      tokens_(base.tokens_),
      unavailable_(base.unavailable_) {}

std::unique_ptr<request_broker> token_broker::for_session(const dummy_seed& seed) const {
  std::string dummy = shaped_like(access_token_shape(spec().type), &seed, name(), "access token");
  gcp_dummy_client client;
  if (spec().type == "gcp") client = gcp_client_like_googles(&seed, name());
  return std::unique_ptr<token_broker>(
      new token_broker(*this, std::move(dummy), std::move(client)));
}

std::string token_broker::gcp_key_file() const {
  nlohmann::ordered_json key;
  key["type"] = "authorized_user";
  key["client_id"] = gcp_client_.client_id;
  key["client_secret"] = gcp_client_.client_secret;
  key["refresh_token"] = gcp_client_.refresh_token;
  key["token_uri"] = google_token_uri;
  return key.dump(2) + "\n";
}

std::string token_broker::gcp_token_answer() const {
  // Telling the real token's remaining life would only make clients ask again and again.
  nlohmann::ordered_json answer;
  answer["access_token"] = dummy_;
  answer["expires_in"] = 3599;
  answer["scope"] = scopes_of(spec());
  answer["token_type"] = "Bearer";
  return answer.dump();
}

credential_values token_broker::values() const {
  credential_values v;
  v.dummies.push_back(dummy_);
  if (spec().type == "gcp") {
    v.dummies.push_back(gcp_client_.client_secret);
    v.dummies.push_back(gcp_client_.refresh_token);
  }
  return v;
}

void token_broker::rotated_values(system_clock::time_point now,
                                  std::vector<scrub_pattern>& out) const {
  for (const issued_token* issued : live(now))
    out.push_back({issued->token.expose(), mask(issued->token.size())});
}

void token_broker::dummy_variables(std::vector<dummy_variable>& out) const {
  if (spec().type == "gcp") {
    out.push_back({"CLOUDSDK_AUTH_ACCESS_TOKEN", dummy_, name()});
    return;
  }
  for (const std::string& variable : spec().env) out.push_back({variable, dummy_, name()});
}

void token_broker::dummy_files(std::vector<dummy_file>& out) const {
  if (spec().type == "gcp" && !spec().env.empty())
    out.push_back({spec().env.front(), "gcp-" + name() + ".json", gcp_key_file(), name(), {}});
}

int token_broker::swap_header(std::string_view name, std::string& value) const {
  if (!is_authorization(name)) return 0;
  auto auth = parse_auth_value(value);
  if (!auth || !http::iequals(auth->scheme, "bearer") || auth->token != dummy_) return 0;
  const issued_token* token = mints().empty() ? current() : minted_token(system_clock::now());
  if (!token) return 0;
  value.replace(auth->token_at, auth->token.size(), token->token.expose());
  return 1;
}

std::string_view token_broker::mints() const {
  return spec().access_boundary.empty() ? "" : "downscoped Google access token";
}

std::optional<system_clock::time_point> token_broker::minted_until() const {
  if (mints().empty() || !tokens_) return std::nullopt;
  return current()->expires;
}

const issued_token* token_broker::minted_token(system_clock::time_point now) const {
  const issued_token* token = current();
  return token && token->expires > now ? token : nullptr;
}

std::unique_ptr<request_step> token_broker::claim(const request_context& where,
                                                  std::string_view method, std::string_view,
                                                  const std::vector<http::header_field>& headers,
                                                  bool has_body, request_decision& refused) const {
  if (!mints().empty() && usable(where) && !minted_token(system_clock::now())) {
    // swap_header left the dummy where a good token would have gone.
    for (const auto& h : headers) {
      if (!is_authorization(h.name)) continue;
      auto auth = parse_auth_value(h.value);
      if (!auth || !http::iequals(auth->scheme, "bearer") || auth->token != dummy_) continue;
      refused = {request_action::credential_unavailable, name(),
                 tokens_ ? "its downscoped token expired and exchanging for a new one failed "
                           "(see the broker's log)"
                         : unavailable_,
                 0};
      return nullptr;
    }
  }
  if (spec().type != "gcp" || !has_body || method != "POST" || !is_google_token_host(where.host))
    return nullptr;
  return std::make_unique<gcp_token_step>(*this);
}

namespace {

// A fetcher whose every token is exchanged for one downscoped with the credential's access
// boundary (docs/policy.md, "Minted credentials"): the source token goes to Google's STS only.
token_broker::fetcher downscoped(token_broker::fetcher source, const config::credential_spec& spec,
                                 const provider_transport& transport) {
  if (!transport) throw source_error(spec.source + ": no way to reach Google's STS");
  return [source = std::move(source), boundary = spec.access_boundary, transport]() {
    access_token subject = source();
    provider_request request{
        "POST",
        std::string(google_sts_uri),
        {{"Content-Type", "application/x-www-form-urlencoded"}, {"Accept", "application/json"}},
        downscope_form(subject.token.expose(), boundary)};
    provider_answer answer;
    try {
      answer = transport(request);
    } catch (const std::exception& e) {
      base::wipe(request.body);
      throw mint_error(0, std::string("Google's STS could not be reached: ") + e.what());
    }
    base::wipe(request.body);
    access_token token;
    try {
      token = parse_oauth_token_response(answer.body, system_clock::now());
    } catch (const std::exception& e) {
      base::wipe(answer.body);
      throw mint_error(answer.status, std::string("the token exchange failed: ") + e.what());
    }
    base::wipe(answer.body);
    // A downscoped token lives no longer than the one it came from.
    token.expires = std::min(token.expires, subject.expires);
    return token;
  };
}

}  // namespace

// The token source as it is: a command's, or a Google key file's grant.
static std::optional<token_broker::fetcher> make_source_fetcher(
    const config::credential_spec& spec, const provider_transport& transport) {
  const std::string source = spec.source;
  if (spec.type == "azure" || source.starts_with("cmd:")) {
    // A token command (or, for azure, a token kept in a file or variable) read again each time.
    // A command is run once, by the first fetch; a file or variable is looked at first.
    if (!source.starts_with("cmd:") && !load_secret(source)) return std::nullopt;
    return [source]() {
      std::optional<base::secret> output = load_secret(source);
      if (!output) throw source_error(source + ": no token");
      return parse_token_command_output(output->expose(), system_clock::now());
    };
  }
  // gcp: a key file, named by the variable (env:) or given (file:).
  std::string key_source = source;
  if (source.starts_with("env:")) {
    std::optional<base::secret> path = load_secret(source);
    if (!path) return std::nullopt;
    key_source = "file:" + std::string(path->expose());
  }
  if (!load_secret(key_source)) return std::nullopt;
  if (!transport) throw source_error(source + ": no way to reach the token endpoint");
  const std::string scope = scopes_of(spec);
  return [key_source, scope, transport]() {
    std::optional<base::secret> key_file = load_secret(key_source);
    if (!key_file) throw source_error(key_source + ": the key file is gone");
    auto [form, token_uri] = google_grant(*key_file, scope, key_source);
    provider_request request{
        "POST",
        token_uri,
        {{"Content-Type", "application/x-www-form-urlencoded"}, {"Accept", "application/json"}},
        std::move(form)};
    std::string answer = transport(request).body;
    base::wipe(request.body);
    access_token token = parse_oauth_token_response(answer, system_clock::now());
    base::wipe(answer);
    return token;
  };
}

std::optional<token_broker::fetcher> make_token_fetcher(const config::credential_spec& spec,
                                                        const provider_transport& transport) {
  auto fetch = make_source_fetcher(spec, transport);
  if (!fetch || spec.access_boundary.empty()) return fetch;
  return downscoped(std::move(*fetch), spec, transport);
}

}  // namespace broker::brokers
