// A login file's values, their dummies, the dummy copy the child sees, and the OAuth refresh
// that rotates them (login_file.hpp).
#include "brokers/login_file.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <mutex>
#include <shared_mutex>
#include <stdexcept>

#include "base/text.hpp"
#include "brokers/dummy.hpp"
#include "brokers/dummy_key.hpp"
#include "brokers/login_file_format.hpp"
#include "brokers/real_file.hpp"
#include "brokers/secret_source.hpp"
#include "brokers/value_broker.hpp"

namespace broker::brokers {
namespace {

using nlohmann::ordered_json;

// Shorter values are not brokered (credential_set.cpp says why).
constexpr std::size_t min_value_size = 8;
constexpr std::string_view refresh_why = "an OAuth token request, whose refresh token is swapped";

// `body` with the first occurrence of `from` (as sent, or percent-encoded as a form would carry
// it) replaced by `to` in the same form; false when neither occurs. Same length both ways: a
// dummy keeps the real value's punctuation where it is.
bool replace_in_body(std::string& body, std::string_view from, std::string_view to) {
  if (auto at = body.find(from); at != std::string::npos) {
    body.replace(at, from.size(), to);
    return true;
  }
  std::string encoded_from = base::percent_encode(from);
  bool done = false;
  if (auto at = body.find(encoded_from); at != std::string::npos) {
    std::string encoded_to = base::percent_encode(to);
    body.replace(at, encoded_from.size(), encoded_to);
    base::wipe(encoded_to);
    done = true;
  }
  base::wipe(encoded_from);
  return done;
}

class login_file_broker;

// A POST to the token endpoint: the refresh token's dummy becomes the current real one, and a
// successful response's new tokens become dummies.
class refresh_step final : public request_step {
 public:
  explicit refresh_step(const login_file_broker& owner) : owner_(owner) {}

  bool holds_real() const override { return true; }
  std::optional<whole_body_need> whole_body() const override {
    return whole_body_need{max_token_request, refresh_why, true};
  }
  request_decision complete(std::string_view, std::string&, std::vector<http::header_field>&,
                            std::string& body) override;
  std::size_t response_whole_body(int status) const override {
    return !redeemed_.empty() && status >= 200 && status < 300 ? max_token_response : 0;
  }
  void rewrite_response(int status, std::string& body) override;

 private:
  const login_file_broker& owner_;
  // The real refresh token sent up (a view into owner_'s values; empty when none was).
  std::string_view redeemed_;
};

class login_file_broker final : public request_broker {
 public:
  login_file_broker(config::credential_spec spec, layer_bindings other_layers, real_file file,
                    std::shared_ptr<const stable_dummies> stable)
      : request_broker(std::move(spec), std::move(other_layers)),
        path_(file.path()),
        file_(std::move(file)),
        stable_(std::move(stable)) {}

  // Takes the listed values out of `doc` (a copy of the real file), leaving their dummies in
  // it: the child's copy. False when there is none.
  bool take_values(ordered_json& doc) {
    const auto& file = *spec().login_file;
    for (const std::string& field : file.fields) take(doc, field, false);
    if (file.refresh) take(doc, file.refresh->token, true);
    initial_ = issued_.size();
    copy_ = doc.dump(2) + "\n";
    return !issued_.empty();
  }

  // A YAML login file (gh's hosts.yml): every scalar of a listed key, at any depth, is a value
  // (gh keeps one oauth_token per host). The copy is the file's text with each one replaced by
  // its dummy (same length, same quoting), so nothing else of it changes.
  bool take_yaml_values(const base::secret& text) {
    copy_ = std::string(text.expose());
    for (const yaml_value& v : yaml_values(copy_, spec().login_file->fields)) {
      if (v.size < min_value_size) continue;
      issue(std::string(v.key), base::secret(copy_.substr(v.at, v.size)), false);
      copy_.replace(v.at, v.size, issued_.back().carrier->dummy());  // same length: spans hold
    }
    initial_ = issued_.size();
    if (issued_.empty()) base::wipe(copy_);
    return !issued_.empty();
  }

  // A login file is brokered for the one wrap session that sees its copy: a refresh writes the
  // user's file back, which sessions sharing it would race on.
  std::unique_ptr<request_broker> for_session(const dummy_seed&) const override {
    throw std::logic_error(
        "credential " + name() +
        ": a login file is brokered for one wrap session, not per gateway session");
  }

  credential_values values() const override {
    credential_values v;  // every real value is a rotated one (rotated_values)
    for (std::size_t i = 0; i < initial_; ++i) v.dummies.push_back(issued_[i].carrier->dummy());
    return v;
  }
  void rotated_values(std::chrono::system_clock::time_point,
                      std::vector<scrub_pattern>& out) const override {
    std::shared_lock lock(mutex_);
    for (const auto& v : issued_) out.push_back(v.carrier->values().reals.front());
  }
  void rotated_dummies(std::vector<std::string_view>& out) const override {
    std::shared_lock lock(mutex_);
    for (std::size_t i = initial_; i < issued_.size(); ++i)
      out.push_back(issued_[i].carrier->dummy());
  }
  bool rotates() const override { return true; }
  void dummy_variables(std::vector<dummy_variable>&) const override {}
  void dummy_files(std::vector<dummy_file>& out) const override {
    out.push_back({"", "login-" + name() + ".json", copy_, name(), path_});
  }

  // The family's places (Authorization: Bearer, its header, opted-in query parameters), for
  // every value but the refresh token, which only its token endpoint gets.
  int swap_header(std::string_view name, std::string& value) const override {
    std::shared_lock lock(mutex_);
    for (const auto& v : issued_)
      if (!v.refresh)
        if (int n = v.carrier->swap_header(name, value)) return n;
    return 0;
  }
  int swap_query(std::string& target) const override {
    std::shared_lock lock(mutex_);
    int n = 0;
    for (const auto& v : issued_)
      if (!v.refresh) n += v.carrier->swap_query(target);
    return n;
  }

  std::unique_ptr<request_step> claim(const request_context& where, std::string_view method,
                                      std::string_view target,
                                      const std::vector<http::header_field>&, bool has_body,
                                      request_decision&) const override {
    const auto& refresh = spec().login_file->refresh;
    if (!refresh || method != "POST" || !has_body) return nullptr;
    // "https://" HOST[:PORT] PATH: the host and the path must both be the endpoint's.
    const std::string_view url = std::string_view(refresh->url).substr(8);
    const std::string_view authority = url.substr(0, url.find('/'));
    const std::string_view host = authority.substr(0, authority.find(':'));
    const std::string_view path = url.substr(authority.size());
    if (base::lower(host) != base::lower(where.host) || target.substr(0, target.find('?')) != path)
      return nullptr;
    return std::make_unique<refresh_step>(*this);
  }

  // The body's refresh-token dummy (any issued) → the current real refresh token, the newest
  // the real file holds (a view that stays valid); empty when the body carries none of them.
  std::string_view redeem(std::string& body) const {
    if (!file_.at_path()) {
      // Renamed away, replaced or removed since the session began (docs/security-model.md):
      // whatever the path names now is not the user's login, and a refresh would spend its token
      // for a file nobody reads.
      spdlog::warn(
          "credential {}: {} is no longer the file the session began with; its refresh "
          "token is not redeemed",
          name(), path_);
      return {};
    }
    adopt_newer_file();
    std::shared_lock lock(mutex_);
    if (current_refresh_ < 0) return {};
    const auto& current = issued_[static_cast<std::size_t>(current_refresh_)];
    for (const auto& v : issued_) {
      if (!v.refresh) continue;
      if (replace_in_body(body, v.carrier->dummy(), real_of(current))) return real_of(current);
    }
    return {};
  }

  // A successful token response to a request that redeemed `redeemed`: its tokens become
  // dummies in `body`, the broker's current values, and the real file's.
  void rotate(std::string_view redeemed, std::string& body) const {
    ordered_json doc;
    try {
      doc = ordered_json::parse(body);
    } catch (const nlohmann::json::parse_error&) {
      return;  // no JSON: no token this broker knows how to find
    }
    const json_wiper wipe_doc{doc};
    if (!doc.is_object()) return;
    const auto& refresh = *spec().login_file->refresh;
    std::vector<std::pair<std::string, base::secret>> renewed;  // file member → new real value
    std::unique_lock lock(mutex_);
    for (const auto& [member, field] : refresh.response) {
      auto it = doc.find(member);
      if (it == doc.end() || !it->is_string() ||
          it->get_ref<std::string&>().size() < min_value_size)
        continue;
      std::string& text = it->get_ref<std::string&>();
      const bool is_refresh = field == refresh.token;
      issue(field, base::secret(std::string(text)), is_refresh);
      renewed.emplace_back(field, base::secret(std::string(text)));
      text = issued_.back().carrier->dummy();
    }
    std::optional<std::int64_t> expires_at_ms;
    if (auto it = doc.find("expires_in"); it != doc.end() && it->is_number()) {
      const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::system_clock::now().time_since_epoch());
      expires_at_ms = now.count() + static_cast<std::int64_t>(it->get<double>() * 1000);
    }
    lock.unlock();
    base::wipe(body);
    body = doc.dump();
    if (!renewed.empty()) write_back(redeemed, renewed, expires_at_ms);
  }

 private:
  struct issued {
    std::string field;                      // the member path in the file
    std::unique_ptr<value_broker> carrier;  // the real value and its dummy, swapped per family
    bool refresh = false;                   // the refresh token: for its token endpoint only
  };

  static std::string_view real_of(const issued& v) {
    return v.carrier->values().reals.front().find;
  }

  // One value from the file into the issued list (called before any request, or under the
  // unique lock), its dummy left in `doc`.
  void take(ordered_json& doc, const std::string& field, bool refresh) const {
    ordered_json* member = member_at(doc, field);
    if (!member || !member->is_string()) return;
    std::string& text = member->get_ref<std::string&>();
    if (text.size() < min_value_size) return;
    issue(field, base::secret(std::string(text)), refresh);
    base::wipe(text);
    text = issued_.back().carrier->dummy();
  }

  void issue(const std::string& field, base::secret real, bool refresh) const {
    std::string dummy = stable_ && !refresh && !renewed(field) ? stable_->dummy(real, name(), field)
                                                               : make_dummy(real);
    issued v;
    v.field = field;
    v.refresh = refresh;
    v.carrier = make_value_broker({spec(), std::move(real), std::move(dummy), {}});
    issued_.push_back(std::move(v));
    if (refresh) current_refresh_ = static_cast<long>(issued_.size() - 1);
  }

  // Whether a refresh renews the file's member `field` (an OAuth token, whose dummy is random
  // in every session); an API key kept beside the tokens is not.
  bool renewed(const std::string& field) const {
    const auto& refresh = spec().login_file->refresh;
    if (!refresh) return false;
    for (const auto& [member, renews] : refresh->response)
      if (renews == field) return true;
    return false;
  }

  // When the real file holds a refresh token this broker never issued, another session (or the
  // user) refreshed since: its tokens are newer, and used from now on.
  void adopt_newer_file() const {
    const auto& refresh = spec().login_file->refresh;
    std::optional<ordered_json> doc;
    try {
      doc = parse_json_object(file_.read(), path_);
    } catch (const std::exception& e) {
      spdlog::warn("credential {}: reading the login file again failed ({})", name(), e.what());
    }
    if (!doc) return;
    const json_wiper wipe_doc{*doc};
    ordered_json* token = member_at(*doc, refresh->token);
    if (!token || !token->is_string()) return;
    std::unique_lock lock(mutex_);
    for (const auto& v : issued_)
      if (v.refresh && real_of(v) == token->get_ref<const std::string&>()) return;
    spdlog::info("credential {}: the login file was refreshed elsewhere; using its tokens", name());
    for (const std::string& field : spec().login_file->fields) take(*doc, field, false);
    take(*doc, refresh->token, true);
  }

  // The new real values into the real file, through the descriptor opened before the child
  // started (never through what the path names now), unless it no longer holds `redeemed`
  // (refreshed elsewhere meanwhile: its tokens are kept). In place: the child's view of the
  // file is a bind mount on it, which a rename(2) would detach.
  void write_back(std::string_view redeemed,
                  const std::vector<std::pair<std::string, base::secret>>& renewed,
                  std::optional<std::int64_t> expires_at_ms) const {
    const auto& refresh = *spec().login_file->refresh;
    try {
      std::optional<ordered_json> doc = parse_json_object(file_.read(), path_);
      const json_wiper wipe_doc{*doc};
      ordered_json* token = member_at(*doc, refresh.token);
      if (token && token->is_string() && token->get_ref<const std::string&>() != redeemed) {
        spdlog::warn("credential {}: {} was refreshed elsewhere meanwhile; kept as it is", name(),
                     path_);
        return;
      }
      for (const auto& [field, value] : renewed)
        if (ordered_json* member = make_member_at(*doc, field)) *member = value.expose();
      if (expires_at_ms && !refresh.expires_at_ms.empty())
        if (ordered_json* member = make_member_at(*doc, refresh.expires_at_ms))
          *member = *expires_at_ms;
      std::string text = doc->dump(2) + "\n";
      const base::wipe_on_exit wipe_text([&text] { base::wipe(text); });
      file_.write(text);
      spdlog::info("credential {}: the refreshed login was written back to {}", name(), path_);
    } catch (const std::exception& e) {
      spdlog::error(
          "credential {}: writing the refreshed login back to {} failed ({}); the user "
          "may have to log in again",
          name(), path_, e.what());
    }
  }

  std::string path_;  // the real file, "~/" expanded
  real_file file_;    // opened before the child started: every read and write goes through it
  std::shared_ptr<const stable_dummies> stable_;  // null: every dummy random
  std::string copy_;                              // the child's copy, dummies only
  // What refreshes change, from any thread: under mutex_.
  mutable std::shared_mutex mutex_;
  mutable std::deque<issued> issued_;  // never shrinks: views into it stay valid
  std::size_t initial_ = 0;            // how many came from the file at the start
  mutable long current_refresh_ = -1;  // the newest refresh token's index
};

request_decision refresh_step::complete(std::string_view, std::string&,
                                        std::vector<http::header_field>&, std::string& body) {
  redeemed_ = owner_.redeem(body);
  if (redeemed_.empty()) return {};
  return {request_action::pass, owner_.name(), "body refresh_token", 1};
}

void refresh_step::rewrite_response(int, std::string& body) {
  if (!redeemed_.empty()) owner_.rotate(redeemed_, body);
}

}  // namespace

std::unique_ptr<request_broker> make_login_file_broker(
    const config::credential_spec& spec, request_broker::layer_bindings other_layers,
    const std::string& home, std::string& why, std::shared_ptr<const stable_dummies> stable) {
  std::string path = spec.login_file->path;
  if (path.starts_with("~/")) {
    if (home.empty()) {
      why = "no home directory for " + path;
      return nullptr;
    }
    path = home + path.substr(1);
  }
  // Opened here, before any child runs, and kept: every later read and write goes through it.
  std::optional<real_file> file = real_file::open(path);
  if (!file) {
    why = "no file " + path;
    return nullptr;
  }
  const base::secret text = file->read();
  auto broker = std::make_unique<login_file_broker>(spec, std::move(other_layers), std::move(*file),
                                                    std::move(stable));
  if (path.ends_with(".yml") || path.ends_with(".yaml")) {
    if (spec.login_file->refresh)
      throw source_error("file:" + path + ": a YAML login file cannot be refreshed");
    if (!broker->take_yaml_values(text)) {
      why = "no listed value in " + path;
      return nullptr;
    }
    return broker;
  }
  ordered_json doc = parse_json_object(text, path);
  const json_wiper wipe_doc{doc};
  if (!broker->take_values(doc)) {
    why = "no listed value in " + path;
    return nullptr;
  }
  return broker;
}

}  // namespace broker::brokers
