// The per-request decision (docs/policy.md): real values anywhere → real_secret_blocked; a dummy
// that may not go to this destination → credential_not_bound; a bound dummy outside its
// credential's scope → credential_out_of_scope; otherwise bound dummies become real in the
// places their family uses. Everything is checked before anything is rewritten.
// Heads are searched with the set's value catalogs over the request's texts; bodies get a
// body_scan made from the same catalogs.
#include <algorithm>
#include <chrono>
#include <mutex>
#include <optional>

#include "base/text.hpp"
#include "brokers/credential_set.hpp"
#include "brokers/credential_set_catalog.hpp"
#include "brokers/credential_set_request_text.hpp"
#include "brokers/families.hpp"

namespace broker::brokers {
namespace {

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

  // Scans every text with `catalog`, keeping the values that `refused(value_info)` gives an
  // action other than pass.
  template <class Refused>
  void scan(const value_catalog& catalog, Refused refused) {
    for (const request_text::text& t : text_.texts()) {
      catalog.scan(t.bytes, [&](std::uint32_t hit) {
        const value_catalog::needle& n = catalog.needles()[hit];
        const value_catalog::value_info& v = catalog.values()[n.value];
        const request_action action = refused(v);
        if (action == request_action::pass) return;
        const finding f{&catalog, n.value, t.place, n.form, t.how, action};
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
    return request_decision{
        f->action, v.credential, text_.where(f->place) + how_found(f->form, f->how), 0, {}};
  }
  // The broker whose value the decision is about.
  std::size_t owner() const {
    const std::optional<finding>& f = real_ ? real_ : dummy_;
    return f->catalog->values()[f->value].owner;
  }

 private:
  struct finding {
    const value_catalog* catalog;
    std::uint32_t value;
    std::uint32_t place;
    value_form form;
    std::uint8_t how;
    request_action action;
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
                                       std::vector<http::header_field>& headers,
                                       swapped_values* swaps) const {
  return check_and_swap(where, target, headers, swaps, nullptr);
}

request_decision credential_set::check_and_swap(const request_context& where, std::string& target,
                                                std::vector<http::header_field>& headers,
                                                swapped_values* swaps,
                                                std::vector<std::size_t>* carried) const {
  if (empty()) return {};
  {
    // Each usable broker's scope, judged on this request (empty when no broker is scoped).
    std::vector<scope_verdict> scopes;
    for (std::size_t i = 0; i < brokers_.size(); ++i) {
      const request_broker& b = *brokers_[i];
      if ((!b.scoped() && !b.spec().mcp_tools) || !b.usable(where)) continue;
      scopes.resize(brokers_.size());
      scopes[i] = b.judge_mcp_tool(where);
      if (!scopes[i].refused() && b.scoped())
        scopes[i] = b.judge_scope(where.host, where.method, target);
    }
    auto refused = [&](const value_catalog::value_info& v) {
      if (v.action == request_action::real_secret_blocked) return v.action;
      if (!brokers_[v.owner]->usable(where)) return request_action::credential_not_bound;
      if (!scopes.empty() && scopes[v.owner].refused())
        return request_action::credential_out_of_scope;
      if (carried && std::find(carried->begin(), carried->end(), v.owner) == carried->end())
        carried->push_back(v.owner);
      return request_action::pass;
    };
    const request_text text(target, headers);
    finder find(text);
    find.scan(*catalog_, refused);
    std::shared_ptr<const value_catalog> rotated;  // held while its findings are
    if (!find.real_found() && (rotated = rotated_catalog())) find.scan(*rotated, refused);
    if (auto decision = find.decision()) {
      if (decision->action == request_action::credential_out_of_scope) {
        const scope_verdict& v = scopes[find.owner()];
        decision->where = v.why;
        decision->scope_key = v.key;
      }
      return *decision;
    }
  }

  // Only brokers usable here swap. What they rewrite is noted with the client's form, for the
  // response stage.
  // Each by the broker that swaps its dummy here (a stand-in's on a call of its MCP tools),
  // chosen on the target as sent.
  std::vector<const request_broker*> usable;
  for (std::size_t i = 0; i < brokers_.size(); ++i)
    if (brokers_[i]->usable(where)) usable.push_back(&swapping(i, where, target));
  request_decision decision;
  auto note = [&](const request_broker& b, int swapped, std::string_view at) {
    if (decision.credential.empty()) {
      decision.credential = b.name();
      decision.where = at;
    }
    decision.swapped += swapped;
  };
  if (usable.empty()) return decision;
  for (http::header_field& h : headers) {
    std::string sent = swaps ? h.value : std::string();
    int swapped = 0;
    for (const request_broker* b : usable) {
      const int n = b->swap_header(h.name, h.value);
      if (n > 0) note(*b, n, "header " + base::lower(h.name));
      swapped += n;
    }
    if (swapped > 0 && swaps) swaps->add(h.value, sent);
  }
  const std::string sent_target = swaps ? target : std::string();
  int swapped = 0;
  for (const request_broker* b : usable) {
    const int n = b->swap_query(target);
    if (n > 0) note(*b, n, "query");
    swapped += n;
  }
  if (swapped > 0 && swaps) swaps->add(target, sent_target);
  return decision;
}

const request_broker& credential_set::swapping(std::size_t i, const request_context& where,
                                               std::string_view target) const {
  for (const stand_in& s : stand_ins_) {
    if (s.base != i) continue;
    const request_broker& tool = *brokers_[s.tool];
    if (!tool.usable(where) || tool.judge_mcp_tool(where).refused()) continue;
    // A scope that needs the body (a GraphQL read) is judged by the plan for the credential the
    // request carries: the stand-in is not made then, the base credential goes.
    if (tool.scoped()) {
      const scope_verdict v = tool.judge_scope(where.host, where.method, target);
      if (v.refused() || v.graphql_body) continue;
    }
    return *s.swapper;
  }
  return *brokers_[i];
}

void credential_set::catalog_values() {
  std::vector<credential_values> values;
  for (const auto& b : brokers_) values.push_back(b->values());
  std::vector<value_catalog::entry> entries;
  for (std::size_t i = 0; i < brokers_.size(); ++i)
    for (const scrub_pattern& real : values[i].reals)
      entries.push_back({real.find, request_action::real_secret_blocked, brokers_[i]->name(), i});
  for (std::size_t i = 0; i < brokers_.size(); ++i)
    for (std::string_view dummy : values[i].dummies)
      entries.push_back({dummy, request_action::credential_not_bound, brokers_[i]->name(), i});
  catalog_ = std::make_shared<const value_catalog>(entries);
  // Only a set with values that rotate (access tokens, temporary AWS credentials: each has one
  // from the start) looks for them on every request.
  std::vector<scrub_pattern> rotated;
  const auto now = std::chrono::system_clock::now();
  bool rotates = false;
  for (const auto& b : brokers_) {
    b->rotated_values(now, rotated);
    rotates = rotates || b->rotates();
  }
  if (!rotated.empty() || rotates) rotated_ = std::make_unique<rotated_cache>();
}

std::shared_ptr<const value_catalog> credential_set::rotated_catalog() const {
  if (!rotated_) return nullptr;
  // Reals first, then dummies (the catalog's order), each with its broker's index.
  std::vector<std::pair<std::string_view, std::string_view>> values;
  std::vector<value_catalog::entry> entries;
  std::vector<scrub_pattern> rotated;
  std::vector<std::string_view> dummies;
  const auto now = std::chrono::system_clock::now();
  for (std::size_t i = 0; i < brokers_.size(); ++i) {
    rotated.clear();
    brokers_[i]->rotated_values(now, rotated);
    for (const scrub_pattern& p : rotated)
      entries.push_back({p.find, request_action::real_secret_blocked, brokers_[i]->name(), i});
  }
  for (std::size_t i = 0; i < brokers_.size(); ++i) {
    dummies.clear();
    brokers_[i]->rotated_dummies(dummies);
    for (std::string_view d : dummies)
      entries.push_back({d, request_action::credential_not_bound, brokers_[i]->name(), i});
  }
  if (entries.empty()) return nullptr;
  for (const auto& e : entries) values.emplace_back(e.value, e.credential);
  std::lock_guard lock(rotated_->mutex);
  if (!rotated_->catalog || !rotated_->catalog->holds(values))
    rotated_->catalog = std::make_shared<const value_catalog>(entries);
  return rotated_->catalog;
}

body_scan credential_set::request_body_scan(const request_context& where) const {
  body_scan scan;
  auto add = [&](std::shared_ptr<const value_catalog> catalog) {
    if (!catalog) return;
    std::vector<bool> refused(catalog->values().size());
    for (std::size_t i = 0; i < refused.size(); ++i) {
      const auto& v = catalog->values()[i];
      refused[i] =
          v.action == request_action::real_secret_blocked || !brokers_[v.owner]->usable(where);
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
