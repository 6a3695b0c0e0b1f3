// The per-request decision (DESIGN §5): real values anywhere → real_secret_blocked; a dummy
// that may not go to this destination → credential_not_bound; otherwise bound dummies become
// real in the places their family uses. Everything is checked before anything is rewritten.
// Heads are searched with the set's value catalogs over the request's texts; bodies get a
// body_scan made from the same catalogs.
#include <chrono>
#include <mutex>
#include <optional>

#include "brokers/credential_set.hpp"
#include "brokers/credential_set_catalog.hpp"
#include "brokers/credential_set_request_text.hpp"
#include "brokers/families.hpp"
#include "brokers/text.hpp"

namespace broker::brokers {
namespace {

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

// How a value was found, for a refusal's `where` (", base64-encoded"...); "" as sent.
std::string how_found(value_form form, std::uint8_t how) {
  std::string out;
  if (how & request_text::joined) out += ", split across repeated header fields";
  if (form == value_form::base64) out += ", base64-encoded";
  if (form == value_form::percent || (how & request_text::percent_decoded))
    out += ", percent-encoded";
  return out;
}

// What a request head carries that it must not, over the catalogs it is scanned with: a real
// value before any dummy; of those, the earliest value in its catalog's order, then the earliest
// place, then the plainest form (a dummy inside a Basic credential is "header authorization",
// not its base64 fragment).
class finder {
 public:
  explicit finder(const request_text& text) : text_(text) {}

  // Scans every text with `catalog`, keeping the values `refused(value_info)` says may not go.
  template <class Refused>
  void scan(const value_catalog& catalog, Refused refused) {
    for (const request_text::text& t : text_.texts()) {
      catalog.scan(t.bytes, [&](std::uint32_t hit) {
        const value_catalog::needle& n = catalog.needles()[hit];
        const value_catalog::value_info& v = catalog.values()[n.value];
        if (!refused(v)) return;
        const finding f{&catalog, n.value, t.place, n.form, t.how};
        auto& best = v.action == request_action::real_secret_blocked ? real_ : dummy_;
        if (!best || f.before(*best)) best = f;
      });
    }
  }
  bool real_found() const { return real_.has_value(); }

  std::optional<request_decision> decision() const {
    const std::optional<finding>& f = real_ ? real_ : dummy_;
    if (!f) return std::nullopt;
    const value_catalog::value_info& v = f->catalog->values()[f->value];
    return request_decision{v.action, v.credential,
                            text_.where(f->place) + how_found(f->form, f->how), 0};
  }

 private:
  struct finding {
    const value_catalog* catalog;
    std::uint32_t value;
    std::uint32_t place;
    value_form form;
    std::uint8_t how;
    // Only findings in one catalog are compared (the rotated one is scanned when the set's
    // own has no real value).
    bool before(const finding& o) const {
      if (value != o.value) return value < o.value;
      if (place != o.place) return place < o.place;
      if (form != o.form) return form < o.form;
      return how < o.how;
    }
  };
  const request_text& text_;
  std::optional<finding> real_, dummy_;
};

}  // namespace

request_decision credential_set::apply(const request_context& where, std::string& target,
                                       std::vector<http::header_field>& headers) const {
  if (empty()) return {};  // no plain credentials and no token credentials
  {
    const request_text text(target, headers);
    finder find(text);
    find.scan(*catalog_, [&](const value_catalog::value_info& v) {
      return v.action == request_action::real_secret_blocked || !usable_owner(v.owner, where);
    });
    std::shared_ptr<const value_catalog> rotated;  // held while its findings are
    if (!find.real_found() && (rotated = rotated_catalog()))
      find.scan(*rotated, [](const value_catalog::value_info&) { return true; });
    if (auto refused = find.decision()) return *refused;
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

void credential_set::catalog_values() {
  std::vector<value_catalog::entry> entries;
  for (std::size_t i = 0; i < credentials_.size(); ++i) {
    const credential& c = *credentials_[i];
    entries.push_back({c.real.expose(), request_action::real_secret_blocked, c.spec.name, i});
  }
  for (std::size_t i = 0; i < credentials_.size(); ++i) {
    const credential& c = *credentials_[i];
    entries.push_back({c.dummy, request_action::credential_not_bound, c.spec.name, i});
  }
  for (std::size_t i = 0; i < tokens_.size(); ++i) {
    for (std::string_view dummy : token_dummies(*tokens_[i]))
      entries.push_back({dummy, request_action::credential_not_bound, tokens_[i]->spec().name,
                         credentials_.size() + i});
  }
  catalog_ = std::make_shared<const value_catalog>(entries);
  if (!tokens_.empty() || !aws_rotations_.empty()) rotated_ = std::make_unique<rotated_cache>();
}

bool credential_set::usable_owner(std::size_t owner, const request_context& where) const {
  if (owner < credentials_.size()) return usable(*credentials_[owner], where);
  return usable(*tokens_[owner - credentials_.size()], where);
}

std::shared_ptr<const value_catalog> credential_set::rotated_catalog() const {
  if (!rotated_) return nullptr;
  const auto values = rotated_values(std::chrono::system_clock::now());
  std::lock_guard lock(rotated_->mutex);
  if (!rotated_->catalog || !rotated_->catalog->holds(values)) {
    std::vector<value_catalog::entry> entries;
    for (const auto& [value, name] : values)
      entries.push_back({value, request_action::real_secret_blocked, name, 0});
    rotated_->catalog = std::make_shared<const value_catalog>(entries);
  }
  return rotated_->catalog;
}

body_scan credential_set::request_body_scan(const request_context& where) const {
  body_scan scan;
  auto add = [&](std::shared_ptr<const value_catalog> catalog) {
    if (!catalog) return;
    std::vector<bool> refused(catalog->values().size());
    for (std::size_t i = 0; i < refused.size(); ++i) {
      const auto& v = catalog->values()[i];
      refused[i] = v.action == request_action::real_secret_blocked || !usable_owner(v.owner, where);
    }
    const auto& needles = catalog->needles();
    for (std::uint32_t i = 0; i < needles.size(); ++i) {
      if (!refused[needles[i].value]) continue;
      scan.patterns_.push_back({needles[i].text, needles[i].text});
      scan.needles_.emplace_back(catalog.get(), i);
    }
    scan.catalogs_.push_back(std::move(catalog));
  };
  add(catalog_);
  add(rotated_catalog());
  return scan;
}

request_decision body_scan::decision(std::size_t index) const {
  if (index >= needles_.size()) return {};
  const auto& [catalog, at] = needles_[index];
  const value_catalog::needle& n = catalog->needles()[at];
  const value_catalog::value_info& v = catalog->values()[n.value];
  return {v.action, v.credential, "body" + how_found(n.form, 0), 0};
}

}  // namespace broker::brokers
