// Internal to brokers/: the file side of a login file (login_file.hpp) — reading it as JSON,
// addressing members by dotted path and finding a YAML file's values by key. The file itself is
// reached through a real_file (real_file.hpp).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "brokers/secret_json.hpp"

namespace broker::brokers {

// Wipes a document's strings however the scope ends (it held real values).
struct json_wiper {
  nlohmann::ordered_json& doc;
  ~json_wiper() { wipe_strings(doc); }
};

// The member at a dotted path ("tokens.access_token"), or null.
nlohmann::ordered_json* member_at(nlohmann::ordered_json& doc, std::string_view path);
// The same, made (with the objects above it) when missing; null when a value that is no object
// is in the way.
nlohmann::ordered_json* make_member_at(nlohmann::ordered_json& doc, std::string_view path);

// A file's text (`path` names it in errors) as one JSON object, its member order kept. Throws
// source_error naming the file and, for a syntax error, only its byte offset. The caller wipes
// the document (json_wiper).
nlohmann::ordered_json parse_json_object(const base::secret& text, const std::string& path);

// Where `key: value` (or `- key: value`) lines of a YAML text hold a listed key's scalar, plain
// or quoted (the quotes left out), at any depth.
struct yaml_value {
  std::string_view key;
  std::size_t at = 0, size = 0;  // the value's bytes in the text
};
std::vector<yaml_value> yaml_values(std::string_view text, const std::vector<std::string>& keys);

}  // namespace broker::brokers
