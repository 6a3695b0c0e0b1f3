// The per-request decision (DESIGN §5): real values anywhere → real_secret_blocked; a dummy
// that may not go to this destination → credential_not_bound; otherwise bound dummies become
// real in the places their family uses. Everything is checked before anything is rewritten.
#include <cctype>
#include <chrono>

#include "brokers/credential_set.hpp"
#include "brokers/families.hpp"
#include "brokers/text.hpp"

namespace broker::brokers {
namespace {

// The searchable text of one request head: the target's path and query (raw and
// percent-decoded) and every header name and value (with Basic credentials decoded). The decoded
// copies may hold a real value the child sent, so they are wiped.
class request_text {
 public:
  request_text(std::string_view target, const std::vector<http::header_field>& headers) {
    const std::size_t question = target.find('?');
    path_ = target.substr(0, question);
    if (question != std::string_view::npos) query_ = target.substr(question + 1);
    if (path_.find('%') != std::string_view::npos) path_decoded_ = percent_decode(path_);
    if (query_.find('%') != std::string_view::npos) query_decoded_ = percent_decode(query_);
    fields_.reserve(headers.size());
    for (const http::header_field& h : headers) {
      fields_.push_back({h.name, h.value, {}});
      if (auto basic = decode_basic(h.value)) {
        fields_.back().basic.swap(*basic);
        wipe(*basic);  // a short string's bytes stay in its own buffer after a swap or move
      }
    }
  }
  ~request_text() {
    wipe(path_decoded_);
    wipe(query_decoded_);
    for (field& f : fields_) wipe(f.basic);
  }
  request_text(const request_text&) = delete;
  request_text& operator=(const request_text&) = delete;

  // Where `needle` occurs ("path", "query", "header NAME"), or "" when nowhere.
  std::string find(std::string_view needle) const {
    auto in = [needle](std::string_view text) {
      return text.find(needle) != std::string_view::npos;
    };
    if (in(path_) || in(path_decoded_)) return "path";
    if (in(query_) || in(query_decoded_)) return "query";
    // Names too: a header name is as good a carrier as its value (and, holding the value, is
    // not repeated in the answer).
    for (const field& f : fields_) {
      if (in(f.name)) return "header name";
      if (in(f.value) || in(f.basic)) return "header " + lower(f.name);
    }
    return {};
  }

 private:
  struct field {
    std::string_view name;
    std::string_view value;
    std::string basic;
  };
  std::string_view path_, query_;
  std::string path_decoded_, query_decoded_;
  std::vector<field> fields_;
};

// May this credential's real value go to this destination? Bound host, and TLS unless the
// destination is loopback or the credential allows plaintext (DESIGN §1).
bool usable(const config::credential_spec& spec,
            const std::vector<std::vector<config::host_pattern>>& other_layer_hosts,
            const request_context& where) {
  if (!credential_set::bound(spec, other_layer_hosts, where.host)) return false;
  return !where.plaintext || where.loopback || spec.allow_plaintext;
}
bool usable(const credential& c, const request_context& where) {
  return usable(c.spec, c.other_layer_hosts, where);
}
bool usable(const token_credential& t, const request_context& where) {
  return usable(t.spec(), t.other_layer_hosts(), where);
}

// The values of a token credential the child holds: its dummy access token and, for gcp, the
// dummy OAuth client's secret and refresh token.
std::vector<std::string_view> token_dummies(const token_credential& t) {
  std::vector<std::string_view> out{t.dummy()};
  if (t.spec().type == "gcp") {
    out.push_back(t.gcp_client().client_secret);
    out.push_back(t.gcp_client().refresh_token);
  }
  return out;
}

// `Authorization: Bearer DUMMY` → the token's current real value; 1 or 0.
int swap_bearer(std::string& value, std::string_view dummy, std::string_view real) {
  auto auth = parse_auth_value(value);
  if (!auth || !http::iequals(auth->scheme, "bearer") || auth->token != dummy) return 0;
  value.replace(auth->token_at, auth->token.size(), real);
  return 1;
}

}  // namespace

request_decision credential_set::apply(const request_context& where, std::string& target,
                                       std::vector<http::header_field>& headers) const {
  if (empty()) return {};  // no plain credentials and no token credentials
  {
    const request_text text(target, headers);
    for (const auto& c : credentials_) {
      std::string at = text.find(c->real.expose());
      if (!at.empty()) return {request_action::real_secret_blocked, c->spec.name, at, 0};
    }
    for (const auto& [value, name] : rotated_values(std::chrono::system_clock::now())) {
      std::string at = text.find(value);
      if (!at.empty()) return {request_action::real_secret_blocked, std::string(name), at, 0};
    }
    for (const auto& c : credentials_) {
      if (usable(*c, where)) continue;
      std::string at = text.find(c->dummy);
      if (!at.empty()) return {request_action::credential_not_bound, c->spec.name, at, 0};
    }
    for (const auto& t : tokens_) {
      if (usable(*t, where)) continue;
      for (std::string_view dummy : token_dummies(*t)) {
        std::string at = text.find(dummy);
        if (!at.empty()) return {request_action::credential_not_bound, t->spec().name, at, 0};
      }
    }
  }

  request_decision decision;
  auto note = [&](const credential& c, int swapped, std::string_view at) {
    if (swapped == 0) return;
    if (decision.credential.empty()) {
      decision.credential = c.spec.name;
      decision.where = at;
    }
    decision.swapped += swapped;
  };
  for (const auto& c : credentials_) {
    if (!usable(*c, where)) continue;
    for (http::header_field& h : headers) {
      int swapped = c->broker->swap_header(h.name, h.value);
      if (swapped) note(*c, swapped, "header " + lower(h.name));
    }
    note(*c, c->broker->swap_query(target), "query");
  }
  for (const auto& t : tokens_) {
    if (!usable(*t, where)) continue;
    const issued_token& current = t->current();
    for (http::header_field& h : headers) {
      if (!is_authorization(h.name)) continue;
      if (swap_bearer(h.value, t->dummy(), current.token.expose()) == 0) continue;
      if (decision.credential.empty()) {
        decision.credential = t->spec().name;
        decision.where = "header " + lower(h.name);
      }
      ++decision.swapped;
    }
  }
  return decision;
}

std::unique_ptr<aws_signed_request> credential_set::find_aws_request(
    const request_context& where, std::string_view target,
    const std::vector<http::header_field>& headers, bool has_body,
    request_decision& refused) const {
  if (aws_.empty()) return nullptr;
  std::vector<const aws_identity*> usable_ids;
  for (const aws_identity& id : aws_) {
    for (const auto& c : credentials_)
      if (c->spec.name == id.name && c->part == credential_part::aws_key_id && usable(*c, where))
        usable_ids.push_back(&id);
  }
  try {
    auto request = brokers::find_aws_request(usable_ids, target, headers, has_body);
    if (!request) return nullptr;
    if (std::string why = aws_scope_refusal(request->identity(), request->scope()); !why.empty()) {
      refused = {request_action::credential_not_bound, std::string(request->credential()), why, 0};
      return nullptr;
    }
    return request;
  } catch (const sigv4::sigv4_error& e) {
    refused = {request_action::signature_invalid, std::string(), e.what(), 0};
    return nullptr;
  }
}

std::vector<credential_set::body_check> credential_set::body_checks(
    const request_context& where) const {
  std::vector<body_check> checks;
  for (const auto& c : credentials_)
    checks.push_back({c->real.expose(), request_action::real_secret_blocked, c->spec.name});
  for (const auto& [value, name] : rotated_values(std::chrono::system_clock::now()))
    checks.push_back({value, request_action::real_secret_blocked, name});
  for (const auto& c : credentials_)
    if (!usable(*c, where))
      checks.push_back({c->dummy, request_action::credential_not_bound, c->spec.name});
  for (const auto& t : tokens_) {
    if (usable(*t, where)) continue;
    for (std::string_view dummy : token_dummies(*t))
      checks.push_back({dummy, request_action::credential_not_bound, t->spec().name});
  }
  return checks;
}

std::vector<scrub_pattern> credential_set::request_body_patterns(
    const request_context& where) const {
  std::vector<scrub_pattern> patterns;
  for (const body_check& check : body_checks(where)) patterns.push_back({check.value, check.value});
  return patterns;
}

request_decision credential_set::body_decision(const request_context& where,
                                               std::size_t pattern) const {
  const auto checks = body_checks(where);
  if (pattern >= checks.size()) return {};
  return {checks[pattern].action, std::string(checks[pattern].credential), "body", 0};
}

}  // namespace broker::brokers
