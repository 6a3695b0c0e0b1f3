// Internal to brokers/: the file side of a login file (login_file.hpp) — reading it as JSON,
// addressing members by dotted path, finding a YAML file's values by key, and writing the
// refreshed login back in place.
#pragma once

#include <filesystem>
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

// The file as one JSON object, its member order kept; nullopt when the file is missing. Throws
// source_error naming the file and, for a syntax error, only its byte offset. The caller wipes
// the document (json_wiper).
std::optional<nlohmann::ordered_json> read_json_file(const std::string& path);

// Where `key: value` (or `- key: value`) lines of a YAML text hold a listed key's scalar, plain
// or quoted (the quotes left out), at any depth.
struct yaml_value {
  std::string_view key;
  std::size_t at = 0, size = 0;  // the value's bytes in the text
};
std::vector<yaml_value> yaml_values(std::string_view text, const std::vector<std::string>& keys);

// The file's new content written over the old in one write, then cut to its length and synced.
// In place rather than renamed over: a running session's view of the file is a bind mount on
// it, which a rename(2) from outside would detach (the child would then see the real file); the
// agents write their login files in place too. Throws source_error.
void write_in_place(const std::filesystem::path& file, std::string_view text);

}  // namespace broker::brokers
