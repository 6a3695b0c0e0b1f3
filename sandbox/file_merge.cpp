#include "sandbox/file_merge.hpp"

#include <nlohmann/json.hpp>

namespace broker::sandbox {

namespace {

using nlohmann::ordered_json;

std::optional<ordered_json> object_of(std::string_view text) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) return ordered_json::object();
  auto doc = ordered_json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) return std::nullopt;
  return doc;
}

// A JSON text laid out as the child's file was: indented when it was.
std::string dump_like(const ordered_json& doc, std::string_view like) {
  const bool indented =
      like.find('\n') != std::string_view::npos && like.find('\n') + 1 < like.size();
  std::string out = indented ? doc.dump(2) : doc.dump();
  if (!like.empty() && like.back() == '\n') out += '\n';
  return out;
}

ordered_json merged(const ordered_json& base, const ordered_json& host, const ordered_json& child) {
  if (!base.is_object() || !host.is_object() || !child.is_object())
    return child == base ? host : child;
  ordered_json out = ordered_json::object();
  const auto member = [](const ordered_json& o, const std::string& k) -> const ordered_json* {
    auto it = o.find(k);
    return it == o.end() ? nullptr : &*it;
  };
  std::vector<std::string> keys;
  for (const auto* doc : {&host, &child})
    for (const auto& [k, v] : doc->items())
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  for (const std::string& k : keys) {
    const ordered_json *b = member(base, k), *h = member(host, k), *c = member(child, k);
    const bool child_changed = !(c == b || (c && b && *c == *b));
    if (!child_changed) {
      if (h) out[k] = *h;
    } else if (c && h && b && c->is_object() && h->is_object()) {
      out[k] = merged(*b, *h, *c);
    } else if (c) {
      out[k] = *c;
    }  // the child removed it
  }
  return out;
}

}  // namespace

std::optional<std::string> merge_three(std::string_view base, std::string_view host,
                                       std::string_view child) {
  if (host == base) return std::string(child);
  if (child == base) return std::string(host);
  auto b = object_of(base), h = object_of(host), c = object_of(child);
  if (b && h && c) return dump_like(merged(*b, *h, *c), child);
  if (host.starts_with(base) && child.starts_with(base))
    return std::string(host) + std::string(child.substr(base.size()));
  return std::nullopt;
}

}  // namespace broker::sandbox
