// Parsing JSON that holds secrets without leaving copies behind or quoting it in errors.
#include "brokers/secret_json.hpp"

#include <utility>
#include <vector>

#include "brokers/secret_source.hpp"

namespace broker::brokers {

secret_json::secret_json(std::string_view text, std::string_view what) : what_(what) {
  try {
    root_ = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    // e.what() ends with "last read: '...'", the input itself: only the position is reported.
    wipe_strings(root_);
    throw source_error(message("not valid JSON (error at byte " + std::to_string(e.byte) + ")"));
  }
  if (!root_.is_object()) {
    wipe_strings(root_);
    throw source_error(message("not a JSON object"));
  }
}

secret_json::~secret_json() {
  wipe_strings(root_);
}

const nlohmann::json* secret_json::find(std::string_view key) const {
  auto it = root_.find(key);
  return it == root_.end() ? nullptr : &*it;
}

std::optional<base::secret> secret_json::take_secret(std::string_view key) {
  auto it = root_.find(key);
  if (it == root_.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) throw source_error(message("\"" + std::string(key) + "\" is not a string"));
  return base::secret(
      std::move(it->get_ref<std::string&>()));  // copies, then wipes the json's string
}

std::optional<std::string> secret_json::text(std::string_view key) const {
  const nlohmann::json* value = find(key);
  if (value == nullptr || value->is_null()) return std::nullopt;
  if (!value->is_string())
    throw source_error(message("\"" + std::string(key) + "\" is not a string"));
  return value->get<std::string>();
}

std::string secret_json::message(std::string_view message) const {
  return what_ + ": " + std::string(message);
}

namespace {

template <class Json>
void wipe_every_string(Json& value) noexcept {
  // An explicit stack: a document nested thousands deep must not exhaust the call stack.
  std::vector<Json*> pending{&value};
  while (!pending.empty()) {
    Json* v = pending.back();
    pending.pop_back();
    if (v->is_string()) {
      base::wipe(v->template get_ref<std::string&>());
    } else if (v->is_structured()) {
      for (auto& child : *v) pending.push_back(&child);
    }
  }
}

}  // namespace

void wipe_strings(nlohmann::json& value) noexcept {
  wipe_every_string(value);
}

void wipe_strings(nlohmann::ordered_json& value) noexcept {
  wipe_every_string(value);
}

}  // namespace broker::brokers
