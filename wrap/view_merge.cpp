#include "wrap/view_merge.hpp"

#include <nlohmann/json.hpp>

namespace broker::wrap {

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

// The member at `path` ("a.*.b") of `doc`: every match, as (path, pointer) pairs.
void find_members(ordered_json& doc, std::string_view path, const std::string& prefix,
                  std::vector<std::pair<std::string, ordered_json*>>& out) {
  if (!doc.is_object()) return;
  const std::size_t dot = path.find('.');
  const std::string head(path.substr(0, dot));
  for (auto& [k, v] : doc.items()) {
    if (head != "*" && k != head) continue;
    const std::string here = prefix.empty() ? k : prefix + "." + k;
    if (dot == std::string_view::npos)
      out.emplace_back(here, &v);
    else
      find_members(v, path.substr(dot + 1), here, out);
  }
}

// `doc`'s member at the concrete dotted path `path`, made (with objects above) when `make`.
ordered_json* at(ordered_json& doc, std::string_view path, bool make) {
  ordered_json* node = &doc;
  for (;;) {
    if (!node->is_object()) return nullptr;
    const std::size_t dot = path.find('.');
    const std::string key(path.substr(0, dot));
    if (!make && !node->contains(key)) return nullptr;
    node = &(*node)[key];
    if (dot == std::string_view::npos) return node;
    if (node->is_null()) *node = ordered_json::object();
    path.remove_prefix(dot + 1);
  }
}

std::optional<std::string> json_commands(const settings_file& file, std::string_view host_text,
                                         std::string_view child_text,
                                         std::vector<std::string>& changed) {
  auto child = object_of(child_text);
  if (!child) return std::nullopt;
  ordered_json host = object_of(host_text).value_or(ordered_json::object());
  bool touched = false;
  for (const std::string& path : file.keys) {
    std::vector<std::pair<std::string, ordered_json*>> in_child, in_host;
    find_members(*child, path, "", in_child);
    find_members(host, path, "", in_host);
    for (auto& [where, value] : in_child) {
      ordered_json* h = at(host, where, false);
      if (h && *h == *value) continue;
      changed.push_back(where);
      touched = true;
      if (h) {
        *value = *h;
      } else {
        // Not in the host's: removed from the child's (its parent holds it by name).
        const std::size_t dot = where.rfind('.');
        ordered_json* parent =
            dot == std::string::npos ? &*child : at(*child, where.substr(0, dot), false);
        if (parent) parent->erase(dot == std::string::npos ? where : where.substr(dot + 1));
      }
    }
    for (auto& [where, value] : in_host) {
      if (at(*child, where, false)) continue;  // compared above
      changed.push_back(where);                // the child removed one: put back
      touched = true;
      if (ordered_json* c = at(*child, where, true)) *c = *value;
    }
  }
  if (!touched) return std::string(child_text);
  return dump_like(*child, child_text);
}

// The lines of a TOML text that hold `key` at the top level (a value, which may span lines
// while brackets are open) or a table `[key]` / `[key.x]` (up to the next table header).
std::string toml_section(std::string_view text, const std::string& key) {
  std::string out;
  bool in_table = false, top = true;
  int open = 0;
  for (std::size_t begin = 0; begin < text.size();) {
    std::size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(begin, end - begin);
    begin = end + 1;
    const std::size_t first = line.find_first_not_of(" \t");
    const std::string_view trimmed = first == std::string_view::npos ? "" : line.substr(first);
    if (open == 0 && trimmed.starts_with("[")) {
      top = false;
      const std::string_view name = trimmed.substr(trimmed.starts_with("[[") ? 2 : 1);
      in_table = name.starts_with(key) &&
                 (name.size() == key.size() || name[key.size()] == ']' || name[key.size()] == '.');
      if (in_table) out.append(line).append("\n");
      continue;
    }
    const bool starts =
        top && open == 0 && trimmed.starts_with(key) &&
        trimmed.substr(key.size()).find_first_not_of(" \t") != std::string_view::npos &&
        trimmed.substr(key.size())[trimmed.substr(key.size()).find_first_not_of(" \t")] == '=';
    if (in_table || starts || open > 0) {
      out.append(line).append("\n");
      if (!in_table)
        for (char c : line) open += c == '[' || c == '{' ? 1 : c == ']' || c == '}' ? -1 : 0;
    }
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

std::optional<std::string> keep_host_commands(const settings_file& file, std::string_view host,
                                              std::string_view child,
                                              std::vector<std::string>& changed) {
  if (file.kind == settings_file::format::json) return json_commands(file, host, child, changed);
  for (const std::string& key : file.keys)
    if (toml_section(host, key) != toml_section(child, key)) changed.push_back(key);
  return std::string(changed.empty() ? child : host);
}

}  // namespace broker::wrap
