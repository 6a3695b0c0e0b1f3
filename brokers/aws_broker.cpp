// The aws-sigv4 family: its values, the variables the child's SDKs read, and its request step —
// the signature found in the head, verified with the dummy secret and made again with the real
// credentials (the whole body first when the signature covers its hash; aws-chunked bodies
// re-signed chunk by chunk as they stream).
#include "brokers/aws_broker.hpp"

#include <stdexcept>

#include "brokers/aws_assume_role.hpp"
#include "brokers/aws_scope.hpp"
#include "brokers/dummy.hpp"
#include "brokers/dummy_key.hpp"
#include "brokers/swapped_values.hpp"

namespace broker::brokers {
namespace {

constexpr std::string_view signed_body_why =
    "the AWS signature covers the body's hash; an upload can stream instead with "
    "x-amz-content-sha256: UNSIGNED-PAYLOAD or aws-chunked";

std::string signature_refusal(std::string_view why) {
  return "the request's AWS signature was refused: " + std::string(why) +
         ". Requests must be signed with the session's AWS credentials, unaltered";
}

// An aws-chunked body: every chunk's signature checked with the dummy key, then signed with the
// real one; nothing of a chunk that does not verify is released.
class aws_chunk_rewriter final : public body_rewriter {
 public:
  aws_chunk_rewriter(std::unique_ptr<sigv4::chunk_resigner> resigner, std::string credential)
      : resigner_(std::move(resigner)), credential_(std::move(credential)) {}

  void feed(std::string_view in, std::string& out) override {
    try {
      resigner_->feed(in, out);
    } catch (const sigv4::sigv4_error& e) {
      throw refused(e);
    }
  }
  void finish() override {
    try {
      resigner_->finish();
    } catch (const sigv4::sigv4_error& e) {
      throw refused(e);
    }
  }

 private:
  body_refused_error refused(const sigv4::sigv4_error& e) const {
    return body_refused_error(
        {request_action::signature_invalid, credential_, signature_refusal(e.what()), 0});
  }

  std::unique_ptr<sigv4::chunk_resigner> resigner_;
  std::string credential_;
};

constexpr std::string_view scoped_body_why =
    "the credential's scope names AWS actions, which this service's requests name in the body";

// One request signed with the session's dummy key id, to `host`; `scopes` are the credential's
// in each layer that gives one ("s3" and "actions" are judged here, on the signed request).
class aws_step final : public request_step {
 public:
  aws_step(std::unique_ptr<aws_signed_request> request, std::string host,
           std::vector<const config::credential_scope*> scopes, bool has_body)
      : request_(std::move(request)), host_(std::move(host)), scopes_(std::move(scopes)) {
    for (const auto* s : scopes_)
      scope_reads_body_ =
          scope_reads_body_ || (has_body && aws_scope_reads_body(*s, request_->scope().service));
  }

  bool holds_real() const override { return true; }
  std::optional<whole_body_need> whole_body() const override {
    if (request_->needs_body()) return whole_body_need{max_signed_body, signed_body_why};
    if (scope_reads_body_) return whole_body_need{max_signed_body, scoped_body_why};
    return std::nullopt;
  }

  request_decision complete(std::string_view method, std::string& target,
                            std::vector<http::header_field>& headers, std::string& body) override {
    const std::string credential(request_->credential());
    if (std::string why = request_->action_refusal(target, body); !why.empty())
      return {request_action::action_denied, credential, std::move(why), 0};
    if (!scopes_.empty()) {
      const aws_call call =
          aws_call_of(request_->scope().service, host_, method, target, headers, body);
      for (const auto* s : scopes_)
        if (scope_verdict v = judge_aws_scope(*s, call); v.refused())
          return {request_action::credential_out_of_scope, credential, std::move(v.why), 0,
                  std::move(v.key)};
    }
    const std::string target_sent = target;
    std::vector<std::string> values_sent;
    for (const auto& h : headers) values_sent.push_back(h.value);
    try {
      request_->resign(method, target, headers, body);
    } catch (const sigv4::sigv4_error& e) {
      return {request_action::signature_invalid, credential, signature_refusal(e.what()), 0};
    }
    // What the signing rewrote: the signature, the key id, the session token.
    swapped_.add(target, target_sent);
    for (std::size_t i = 0; i < headers.size() && i < values_sent.size(); ++i)
      swapped_.add(headers[i].value, values_sent[i]);
    return {request_action::pass, credential, "signature", 1};
  }

  std::unique_ptr<body_rewriter> request_body_rewriter() override {
    auto resigner = request_->body_resigner();
    if (!resigner) return nullptr;
    return std::make_unique<aws_chunk_rewriter>(std::move(resigner),
                                                std::string(request_->credential()));
  }

  void response_patterns(std::vector<scrub_pattern>& out) const override { swapped_.patterns(out); }

 private:
  std::unique_ptr<aws_signed_request> request_;
  std::string host_;
  std::vector<const config::credential_scope*> scopes_;
  bool scope_reads_body_ = false;
  swapped_values swapped_;
};

aws_real_credentials issue_credentials(aws_credentials c) {
  aws_real_credentials r;
  r.key_id = std::move(c.access_key_id);
  r.secret_key = std::move(c.secret_access_key);
  r.token = std::move(c.session_token);
  r.expires = c.expiration.value_or(std::chrono::system_clock::now() + std::chrono::hours(1));
  return r;
}

base::secret copy(const base::secret& s) {
  return base::secret(std::string(s.expose()));
}

// What AWS's temporary credentials look like (an ASIA key id, a 40-character secret, a session
// token of a few hundred base64 characters): the shapes of a session's dummies for credentials
// each replica fetches for itself.
const std::string& shape_of_temporary_key_id() {
  static const std::string shape = "ASIAQ3EGRXZ7J2NVK5PW";
  return shape;
}
const std::string& shape_of_temporary_secret() {
  static const std::string shape = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
  return shape;
}
const std::string& shape_of_temporary_token() {
  static const std::string shape = [] {
    std::string token = "IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQD";
    while (token.size() < 444) token += "k7Zp2Qm+Xv9Lr4TnB8wYc1JdHs6Ke0Fa3GuVi5Ob/";
    token.resize(444);
    return token;
  }();
  return shape;
}

}  // namespace

aws_broker::aws_broker(init values)
    : request_broker(std::move(values.spec), std::move(values.other_layers)),
      real_(std::make_shared<const aws_credentials>(std::move(values.real))),
      rotation_(std::move(values.rotation)),
      minted_(values.minted),
      unavailable_(std::move(values.unavailable)),
      dummy_key_id_(std::move(values.dummy_key_id)),
      dummy_secret_(std::move(values.dummy_secret)),
      dummy_token_(std::move(values.dummy_token)),
      key_id_masks_(dummy_key_id_),
      secret_masks_(dummy_secret_),
      token_masks_(dummy_token_.empty() ? dummy_secret_ : dummy_token_) {
  check_and_identify();
}

aws_broker::aws_broker(const aws_broker& base, session_dummies dummies)
    : request_broker(base.spec(), base.other_layers()),
      real_(base.real_),
      rotation_(base.rotation_),
      minted_(base.minted_),
      unavailable_(base.unavailable_),
      dummy_key_id_(std::move(dummies.key_id)),
      dummy_secret_(std::move(dummies.secret)),
      dummy_token_(std::move(dummies.token)),
      key_id_masks_(dummy_key_id_),
      secret_masks_(dummy_secret_),
      token_masks_(dummy_token_.empty() ? dummy_secret_ : dummy_token_) {
  check_and_identify();
}

void aws_broker::check_and_identify() {
  if (real_->access_key_id.empty() || real_->secret_access_key.empty() || dummy_key_id_.empty() ||
      dummy_secret_.empty())
    throw std::invalid_argument("credential " + name() + ": an AWS key id without a secret");
  if ((!minted_ && real_->session_token.empty() != dummy_token_.empty()) ||
      (!rotation_ && !minted_ &&
       (dummy_key_id_.size() != real_->access_key_id.size() ||
        dummy_secret_.size() != real_->secret_access_key.size() ||
        dummy_token_.size() != real_->session_token.size())))
    throw std::invalid_argument("credential " + name() + ": dummy and real differ in length");
  identity_ = aws_identity{name(),      dummy_key_id_,   dummy_secret_,    dummy_token_,
                           real_.get(), &spec().regions, &spec().services, rotation_.get()};
}

aws_broker::~aws_broker() = default;

std::unique_ptr<request_broker> aws_broker::for_session(const dummy_seed& seed) const {
  const bool fetched = rotation_ != nullptr || minted_;  // by each replica for itself
  auto shape = [&](const base::secret& real, const std::string& temporary) {
    return fetched ? base::secret(std::string(temporary)) : copy(real);
  };
  session_dummies d;
  d.key_id = seed.dummy(shape(real_->access_key_id, shape_of_temporary_key_id()), name(), "key id");
  d.secret =
      seed.dummy(shape(real_->secret_access_key, shape_of_temporary_secret()), name(), "secret");
  if (!real_->session_token.empty() || minted_)
    d.token = seed.dummy(shape(real_->session_token, shape_of_temporary_token()), name(),
                         "session token");
  return std::unique_ptr<aws_broker>(new aws_broker(*this, std::move(d)));
}

credential_values aws_broker::values() const {
  credential_values v;
  v.reals = {
      {real_->access_key_id.expose(), key_id_masks_.of(real_->access_key_id.size())},
      {real_->secret_access_key.expose(), secret_masks_.of(real_->secret_access_key.size())}};
  v.dummies = {dummy_key_id_, dummy_secret_};
  if (!real_->session_token.empty())
    v.reals.push_back(
        {real_->session_token.expose(), token_masks_.of(real_->session_token.size())});
  if (!dummy_token_.empty()) v.dummies.push_back(dummy_token_);
  return v;
}

void aws_broker::rotated_values(std::chrono::system_clock::time_point now,
                                std::vector<scrub_pattern>& out) const {
  if (!rotation_) return;
  for (const aws_real_credentials* c : rotation_->live(now)) {
    out.push_back({c->key_id.expose(), key_id_masks_.of(c->key_id.size())});
    out.push_back({c->secret_key.expose(), secret_masks_.of(c->secret_key.size())});
    if (!c->token.empty()) out.push_back({c->token.expose(), token_masks_.of(c->token.size())});
  }
}

void aws_broker::dummy_variables(std::vector<dummy_variable>& out) const {
  const std::string* dummies[] = {&dummy_key_id_, &dummy_secret_, &dummy_token_};
  const std::size_t count = dummy_token_.empty() ? 2 : 3;
  for (std::size_t i = 0; i < count && i < spec().env.size(); ++i)
    out.push_back({spec().env[i], *dummies[i], name()});
}

// AWS_PROFILE names a section of the masked ~/.aws files; an SDK that cannot find it fails
// instead of using the dummies.
void aws_broker::displaced_variables(std::vector<std::string>& out) const {
  out.push_back("AWS_PROFILE");
  out.push_back("AWS_DEFAULT_PROFILE");
}

std::unique_ptr<request_step> aws_broker::claim(const request_context& where, std::string_view,
                                                std::string_view target,
                                                const std::vector<http::header_field>& headers,
                                                bool has_body, request_decision& refused) const {
  if (!usable(where)) return nullptr;
  try {
    auto request = find_aws_request({&identity_}, target, headers, has_body);
    if (!request) return nullptr;
    // Minted credentials, or none: never the long-lived key.
    if (minted_ && !rotation_) {
      refused = {request_action::credential_unavailable, name(), unavailable_, 0};
      return nullptr;
    }
    if (minted_ && rotation_->current().expires <= std::chrono::system_clock::now()) {
      refused = {request_action::credential_unavailable, name(),
                 "its temporary credentials expired and renewing them failed (see the broker's "
                 "log)",
                 0};
      return nullptr;
    }
    if (std::string why = aws_scope_refusal(identity_, request->scope()); !why.empty()) {
      // Bound, but outside its allowlists.
      refused = {request_action::scope_not_allowed, name(), std::move(why), 0};
      return nullptr;
    }
    std::vector<const config::credential_scope*> scopes;
    if (spec().scope) scopes.push_back(&*spec().scope);
    for (const auto& s : other_layers().scopes) scopes.push_back(&s);
    return std::make_unique<aws_step>(std::move(request), std::string(where.host),
                                      std::move(scopes), has_body);
  } catch (const sigv4::sigv4_error& e) {
    refused = {request_action::signature_invalid, name(), signature_refusal(e.what()), 0};
    return nullptr;
  }
}

std::string_view aws_broker::mints() const {
  return minted_ ? "AWS AssumeRole credentials" : "";
}

std::optional<std::chrono::system_clock::time_point> aws_broker::minted_until() const {
  if (!minted_ || !rotation_) return std::nullopt;
  return rotation_->current().expires;
}

namespace {

// assume_role: the first credentials now, then a renewer; or, when STS refuses, why.
void assume_role(const config::credential_spec& spec, const aws_credentials& long_lived,
                 const provider_transport& transport, aws_broker::init& init) {
  init.minted = true;
  init.dummy_key_id = make_dummy(base::secret(std::string(shape_of_temporary_key_id())));
  init.dummy_secret = make_dummy(base::secret(std::string(shape_of_temporary_secret())));
  init.dummy_token = make_dummy(base::secret(std::string(shape_of_temporary_token())));
  if (!transport) throw source_error(spec.source + ": no way to reach STS");
  auto key = std::make_shared<aws_credentials>();
  key->access_key_id = copy(long_lived.access_key_id);
  key->secret_access_key = copy(long_lived.secret_access_key);
  key->session_token = copy(long_lived.session_token);
  auto fetch = [role = *spec.assume_role, key, transport, session = new_role_session_name()] {
    provider_request request =
        assume_role_request(role, *key, session, std::chrono::system_clock::now());
    provider_answer answer;
    try {
      answer = transport(request);
    } catch (const std::exception& e) {
      throw mint_error(0, std::string("STS could not be reached: ") + e.what());
    }
    for (auto& [name, value] : request.headers) base::wipe(value);
    aws_real_credentials c = parse_assume_role_answer(answer);
    base::wipe(answer.body);
    return c;
  };
  const auto now = std::chrono::system_clock::now();
  try {
    init.rotation = std::make_shared<const rotating<aws_real_credentials>>(
        "credential " + spec.name + ": its AssumeRole credentials", fetch(), now, fetch);
  } catch (const mint_error& e) {
    init.unavailable = e.what();
    if (e.status() > 0) init.unavailable += " (STS answered " + std::to_string(e.status()) + ")";
  }
}

}  // namespace

std::unique_ptr<aws_broker> make_aws_broker(const config::credential_spec& spec,
                                            aws_credentials real,
                                            request_broker::layer_bindings other_layers,
                                            std::size_t min_size, const stable_dummies* stable,
                                            const provider_transport& transport) {
  // A session token has a variable only when the credential names three.
  if (spec.env.size() < 3) real.session_token = base::secret();
  if (real.access_key_id.size() < min_size || real.secret_access_key.size() < min_size ||
      (!real.session_token.empty() && real.session_token.size() < min_size))
    return nullptr;
  aws_broker::init init;
  // Long-term keys get the user's stable dummies (wrap); temporary ones, which a
  // credential_process renews, random ones.
  const auto dummy_of = [&](const base::secret& value, std::string_view field) {
    return stable && !real.expiration ? stable->dummy(value, spec.name, field) : make_dummy(value);
  };
  init.dummy_key_id = dummy_of(real.access_key_id, "key id");
  init.dummy_secret = dummy_of(real.secret_access_key, "secret");
  if (!real.session_token.empty()) init.dummy_token = dummy_of(real.session_token, "session token");
  if (spec.assume_role) {
    assume_role(spec, real, transport, init);
  } else if (real.expiration) {
    // Temporary credentials (a credential_process that says when they expire): the command is
    // run again before they do.
    aws_credentials first;
    first.access_key_id = copy(real.access_key_id);
    first.secret_access_key = copy(real.secret_access_key);
    first.session_token = copy(real.session_token);
    first.expiration = real.expiration;
    init.rotation = std::make_shared<const rotating<aws_real_credentials>>(
        "credential " + spec.name + ": its temporary AWS credentials",
        issue_credentials(std::move(first)), std::chrono::system_clock::now(), [spec] {
          std::optional<aws_credentials> next = load_aws_credentials(spec.source, spec.env);
          if (!next) throw source_error(spec.source + ": no credentials");
          return issue_credentials(std::move(*next));
        });
  }
  init.spec = spec;
  init.real = std::move(real);
  init.other_layers = std::move(other_layers);
  return std::make_unique<aws_broker>(std::move(init));
}

}  // namespace broker::brokers
