#include "brokers/login_file_format.hpp"

#include <algorithm>

#include "brokers/secret_source.hpp"

namespace broker::brokers {

using nlohmann::ordered_json;

ordered_json* member_at(ordered_json& doc, std::string_view path) {
  ordered_json* node = &doc;
  for (;;) {
    if (!node->is_object()) return nullptr;
    const std::size_t dot = path.find('.');
    auto it = node->find(std::string(path.substr(0, dot)));
    if (it == node->end()) return nullptr;
    node = &*it;
    if (dot == std::string_view::npos) return node;
    path.remove_prefix(dot + 1);
  }
}

ordered_json* make_member_at(ordered_json& doc, std::string_view path) {
  ordered_json* node = &doc;
  for (;;) {
    if (!node->is_object()) return nullptr;
    const std::size_t dot = path.find('.');
    node = &(*node)[std::string(path.substr(0, dot))];
    if (dot == std::string_view::npos) return node;
    if (node->is_null()) *node = ordered_json::object();
    path.remove_prefix(dot + 1);
  }
}

ordered_json parse_json_object(const base::secret& text, const std::string& path) {
  ordered_json doc;
  try {
    doc = ordered_json::parse(text.expose());
  } catch (const nlohmann::json::parse_error& e) {
    throw source_error("file:" + path + ": not JSON (at byte " + std::to_string(e.byte) + ")");
  }
  if (!doc.is_object()) {
    wipe_strings(doc);
    throw source_error("file:" + path + ": expected a JSON object");
  }
  return doc;
}

std::vector<yaml_value> yaml_values(std::string_view text, const std::vector<std::string>& keys) {
  std::vector<yaml_value> out;
  for (std::size_t begin = 0; begin < text.size();) {
    std::size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(begin, end - begin);
    const std::size_t line_at = begin;
    begin = end + 1;
    std::size_t at = line.find_first_not_of(" \t");
    if (at == std::string_view::npos || line[at] == '#') continue;
    if (line.substr(at).starts_with("- ")) at = line.find_first_not_of(" \t", at + 2);
    const std::size_t colon = at == std::string_view::npos ? at : line.find(": ", at);
    if (colon == std::string_view::npos) continue;
    const std::string_view key = line.substr(at, colon - at);
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) continue;
    std::size_t from = line.find_first_not_of(" \t", colon + 2);
    if (from == std::string_view::npos) continue;
    std::size_t to = line.find_last_not_of(" \t\r");
    if (const std::size_t comment = line.find(" #", from); comment != std::string_view::npos)
      to = line.find_last_not_of(" \t", comment);
    if ((line[from] == '"' || line[from] == '\'') && to > from && line[to] == line[from]) {
      ++from;
      --to;
    }
    if (to < from) continue;
    out.push_back({key, line_at + from, to - from + 1});
  }
  return out;
}

}  // namespace broker::brokers
