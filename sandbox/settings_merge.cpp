#include "sandbox/settings_merge.hpp"

#include <algorithm>
#include <sstream>

#include <toml++/toml.h>
#include <nlohmann/json.hpp>

namespace broker::sandbox {

namespace {

using nlohmann::ordered_json;
using path = std::vector<std::string>;

// A TOML value JSON has no type for (dates, times, infinities, NaN) is kept as an object with
// this one member, its TOML text: compared as text, written back as TOML.
constexpr const char* toml_text_key = "\x01toml";

std::vector<std::string> split(std::string_view dotted) {
  std::vector<std::string> out;
  for (std::size_t start = 0;;) {
    const std::size_t dot = dotted.find('.', start);
    out.emplace_back(dotted.substr(start, dot - start));
    if (dot == std::string_view::npos) return out;
    start = dot + 1;
  }
}

std::string joined(const path& p) {
  std::string out;
  for (const auto& name : p) out += (out.empty() ? "" : ".") + name;
  return out;
}

// --- TOML as JSON, and back --------------------------------------------------------------

ordered_json json_of(const toml::node& node);

ordered_json json_of_table(const toml::table& table) {
  ordered_json out = ordered_json::object();
  for (const auto& [key, value] : table) out[std::string(key.str())] = json_of(value);
  return out;
}

ordered_json json_of(const toml::node& node) {
  if (const auto* t = node.as_table()) return json_of_table(*t);
  if (const auto* a = node.as_array()) {
    ordered_json out = ordered_json::array();
    for (const auto& item : *a) out.push_back(json_of(item));
    return out;
  }
  if (const auto* s = node.as_string()) return s->get();
  if (const auto* i = node.as_integer()) return i->get();
  if (const auto* b = node.as_boolean()) return b->get();
  if (const auto* f = node.as_floating_point(); f && std::isfinite(f->get())) return f->get();
  std::ostringstream text;
  text << toml::toml_formatter(node);
  return ordered_json{{toml_text_key, text.str()}};
}

void insert_toml(toml::table& into, const std::string& key, const ordered_json& value);

toml::array toml_array_of(const ordered_json& list) {
  toml::array out;
  for (const auto& item : list) {
    toml::table one;
    insert_toml(one, "v", item);
    if (auto* node = one.get("v")) out.push_back(std::move(*node));
  }
  return out;
}

void insert_toml(toml::table& into, const std::string& key, const ordered_json& value) {
  if (value.is_object() && value.size() == 1 && value.contains(toml_text_key)) {
    // Read back from its own text: the one way to make any TOML value from TOML.
    auto one = toml::parse("v = " + value[toml_text_key].get<std::string>());
    if (auto* node = one.get("v")) into.insert_or_assign(key, std::move(*node));
  } else if (value.is_object()) {
    toml::table table;
    for (const auto& [k, v] : value.items()) insert_toml(table, k, v);
    into.insert_or_assign(key, std::move(table));
  } else if (value.is_array()) {
    into.insert_or_assign(key, toml_array_of(value));
  } else if (value.is_string()) {
    into.insert_or_assign(key, value.get<std::string>());
  } else if (value.is_boolean()) {
    into.insert_or_assign(key, value.get<bool>());
  } else if (value.is_number_integer()) {
    into.insert_or_assign(key, value.get<std::int64_t>());
  } else if (value.is_number()) {
    into.insert_or_assign(key, value.get<double>());
  }
}

std::string toml_text_of(const ordered_json& doc) {
  toml::table table;
  for (const auto& [k, v] : doc.items()) insert_toml(table, k, v);
  std::ostringstream out;
  out << toml::toml_formatter(table) << "\n";
  return out.str();
}

// --- Reading and writing either format ---------------------------------------------------

bool blank(std::string_view text) {
  return text.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

// The document, or nullopt when the text is none of its format. An empty text is an empty
// document (a file that does not exist).
std::optional<ordered_json> parse(settings_format format, std::string_view text) {
  if (blank(text)) return ordered_json::object();
  if (format == settings_format::json) {
    auto doc = ordered_json::parse(text, nullptr, false);
    if (doc.is_discarded() || !doc.is_object()) return std::nullopt;
    return doc;
  }
  try {
    return json_of_table(toml::parse(text));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::string render(settings_format format, const ordered_json& doc, std::string_view like) {
  if (format == settings_format::toml) return toml_text_of(doc);
  const bool indented = like.empty() || (like.find('\n') != std::string_view::npos &&
                                         like.find('\n') + 1 < like.size());
  std::string out = indented ? doc.dump(2) : doc.dump();
  if (like.empty() || like.back() == '\n') out += '\n';
  return out;
}

// --- Which members are data --------------------------------------------------------------

class data_members {
 public:
  explicit data_members(const member_rules& rules) : workspaces_(rules.workspaces) {
    for (const auto& p : rules.data) patterns_.push_back(split(p));
  }

  // `p` is a data member, or lies under one.
  bool covers(const path& p) const {
    return std::any_of(patterns_.begin(), patterns_.end(), [&](const path& pattern) {
      return pattern.size() <= p.size() && matches(pattern, p, pattern.size());
    });
  }

  // Some data member lies strictly under `p`: its members must be looked at one by one.
  bool below(const path& p) const {
    return std::any_of(patterns_.begin(), patterns_.end(), [&](const path& pattern) {
      return pattern.size() > p.size() && matches(pattern, p, p.size());
    });
  }

 private:
  bool matches(const path& pattern, const path& p, std::size_t n) const {
    for (std::size_t i = 0; i < n; ++i) {
      if (pattern[i] == "*") continue;
      if (pattern[i] == "{workspace}") {
        if (!is_workspace(p[i])) return false;
        continue;
      }
      if (pattern[i] != p[i]) return false;
    }
    return true;
  }

  bool is_workspace(std::string name) const {
    while (name.size() > 1 && name.back() == '/') name.pop_back();
    return std::any_of(workspaces_.begin(), workspaces_.end(), [&](const std::string& w) {
      return !w.empty() && w != "/" &&
             (name == w ||
              (name.starts_with(w) && name.size() > w.size() && name[w.size()] == '/'));
    });
  }

  std::vector<path> patterns_;
  std::vector<std::string> workspaces_;
};

const ordered_json* member(const ordered_json* doc, const std::string& key) {
  if (!doc || !doc->is_object()) return nullptr;
  const auto it = doc->find(key);
  return it == doc->end() ? nullptr : &*it;
}

class merger {
 public:
  merger(const data_members& data, ordered_json& result) : data_(data), result_(result) {}

  // Every member the session (`s`) changed from the start (`b`), under `at`.
  void walk(const ordered_json* b, const ordered_json* s, path& at) {
    std::vector<std::string> keys;
    for (const auto* doc : {b, s})
      if (doc && doc->is_object())
        for (const auto& [k, v] : doc->items())
          if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
    for (const auto& key : keys) {
      const ordered_json *bv = member(b, key), *sv = member(s, key);
      if (bv == sv || (bv && sv && *bv == *sv)) continue;
      // A member made empty where there was none (a new project's empty lists) carries
      // nothing: neither taken nor named.
      if (!bv && sv && (sv->is_null() || (sv->is_structured() && sv->empty()))) continue;
      at.push_back(key);
      const bool objects = (!bv || bv->is_object()) && (!sv || sv->is_object());
      if (data_.covers(at))
        apply(at, sv);
      else if (objects && data_.below(at))
        walk(bv, sv, at);
      else
        kept.push_back(joined(at));
      at.pop_back();
    }
  }

  std::vector<std::string> kept;
  bool applied = false;

 private:
  // The session's value at `at` (or its removal) into the result, with objects made above it
  // where the host has none; where the host has something else there, it is named instead.
  void apply(const path& at, const ordered_json* value) {
    ordered_json* node = &result_;
    for (std::size_t i = 0; i + 1 < at.size(); ++i) {
      if (!node->is_object()) {
        kept.push_back(joined(at));
        return;
      }
      auto it = node->find(at[i]);
      if (it == node->end()) {
        if (!value) return;  // removed where the host has none either
        node = &((*node)[at[i]] = ordered_json::object());
      } else {
        node = &*it;
      }
    }
    if (!node->is_object()) {
      kept.push_back(joined(at));
      return;
    }
    if (value)
      (*node)[at.back()] = *value;
    else if (node->erase(at.back()) == 0)
      return;  // removed where the host has none either
    applied = true;
  }

  const data_members& data_;
  ordered_json& result_;
};

}  // namespace

settings_merge merge_settings(settings_format format, const member_rules& rules,
                              std::string_view base, std::string_view host,
                              std::string_view session) {
  settings_merge out;
  const auto s = parse(format, session);
  if (!s) {
    out.readable = false;
    return out;
  }
  // A start that cannot be read is taken as empty: everything in the session's file is judged.
  const auto b = parse(format, base).value_or(ordered_json::object());
  const auto h = parse(format, host);
  ordered_json result = h.value_or(ordered_json::object());
  const data_members data(rules);
  merger m(data, result);
  path at;
  m.walk(&b, &*s, at);
  out.kept = std::move(m.kept);
  if (!h) {
    out.kept.insert(out.kept.begin(), "(your file could not be read, so nothing was merged)");
    return out;
  }
  if (!m.applied) return out;
  // Only data changed, and the host's file is as it was: the session's text goes, as written.
  if (out.kept.empty() && result == *s && !blank(session))
    out.text = std::string(session);
  else
    out.text = render(format, result, host.empty() ? session : host);
  return out;
}

}  // namespace broker::sandbox
