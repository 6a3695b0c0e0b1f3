// The per-request decision (DESIGN §5): real values anywhere → real_secret_blocked; a dummy
// that may not go to this destination → credential_not_bound; otherwise bound dummies become
// real in the places their family uses. Everything is checked before anything is rewritten.
#include <cctype>

#include "brokers/credential_set.hpp"
#include "brokers/families.hpp"

namespace broker::brokers {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The searchable text of one request head: the target's path and query (raw and
// percent-decoded) and every header name and value (with Basic credentials decoded). The decoded
// copies may hold a real value the child sent, so they are wiped.
class request_text {
 public:
  request_text(std::string_view target, const std::vector<proxy::header_field>& headers) {
    const std::size_t question = target.find('?');
    path_ = target.substr(0, question);
    if (question != std::string_view::npos) query_ = target.substr(question + 1);
    if (path_.find('%') != std::string_view::npos) path_decoded_ = percent_decode(path_);
    if (query_.find('%') != std::string_view::npos) query_decoded_ = percent_decode(query_);
    fields_.reserve(headers.size());
    for (const proxy::header_field& h : headers) {
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
bool usable(const credential& c, const request_context& where) {
  if (!credential_set::bound(c, where.host)) return false;
  return !where.plaintext || where.loopback || c.spec.allow_plaintext;
}

}  // namespace

request_decision credential_set::apply(const request_context& where, std::string& target,
                                       std::vector<proxy::header_field>& headers) const {
  if (credentials_.empty()) return {};
  {
    const request_text text(target, headers);
    for (const auto& c : credentials_) {
      std::string at = text.find(c->real.expose());
      if (!at.empty()) return {request_action::real_secret_blocked, c->spec.name, at, 0};
    }
    for (const auto& c : credentials_) {
      if (usable(*c, where)) continue;
      std::string at = text.find(c->dummy);
      if (!at.empty()) return {request_action::credential_not_bound, c->spec.name, at, 0};
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
    for (proxy::header_field& h : headers) {
      int swapped = c->broker->swap_header(h.name, h.value);
      if (swapped) note(*c, swapped, "header " + lower(h.name));
    }
    note(*c, c->broker->swap_query(target), "query");
  }
  return decision;
}

std::vector<scrub_pattern> credential_set::request_body_patterns(
    const request_context& where) const {
  std::vector<scrub_pattern> patterns;
  for (const auto& c : credentials_) patterns.push_back({c->real.expose(), c->real.expose()});
  for (const auto& c : credentials_)
    if (!usable(*c, where)) patterns.push_back({c->dummy, c->dummy});
  return patterns;
}

request_decision credential_set::body_decision(const request_context& where,
                                               std::size_t pattern) const {
  if (pattern < credentials_.size())
    return {request_action::real_secret_blocked, credentials_[pattern]->spec.name, "body", 0};
  std::size_t index = credentials_.size();
  for (const auto& c : credentials_) {
    if (usable(*c, where)) continue;
    if (index++ == pattern) return {request_action::credential_not_bound, c->spec.name, "body", 0};
  }
  return {};
}

}  // namespace broker::brokers
