// JSON (with // and /* */ comments) parsed so that every value remembers the line it came
// from: policy errors must name FILE:LINE: KEY (docs/policy.md), and nlohmann's DOM keeps no
// positions. Private to config/.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace broker::config {

struct located_json {
  std::string source;  // file name used in errors
  nlohmann::json root;
  std::map<std::string, int> lines;  // JSON pointer ("/allow/3/ports") -> line of its key or value
};

// Throws policy_error on a syntax error (line of the offending token) or a duplicate key
// (the DOM would keep only one of the two, silently dropping the other).
located_json parse_located_json(std::string_view text, const std::string& source);

// A value in a located_json together with its pointer, its key as errors spell it
// ("allow[3].ports", "credentials.github.hosts[1]", "credentials.<empty key>") and its line.
// Accessors that find the wrong type throw policy_error naming this node.
class json_node {
 public:
  explicit json_node(const located_json& doc);

  const nlohmann::json& value() const { return *value_; }
  const std::string& key() const { return key_; }  // "(document)" for the root
  int line() const { return line_; }
  // The file it came from, as errors name it.
  const std::string& source() const { return doc_->source; }

  [[noreturn]] void fail(const std::string& message) const;

  // Object access. `find` returns nullopt when the key is absent.
  std::optional<json_node> find(std::string_view name) const;
  std::vector<std::pair<std::string, json_node>> members(const char* expected) const;
  // Every key must be in `known`; the first that is not fails with its own line.
  void reject_unknown_keys(std::initializer_list<std::string_view> known) const;

  // Array access; fails with `expected` ("expected array of integers") on a non-array.
  std::vector<json_node> elements(const char* expected) const;

  void expect_object(const char* expected) const;
  std::string as_string() const;  // "expected string"
  bool as_bool() const;           // "expected true or false"
  // A non-empty array whose elements are all strings; fails on the array otherwise.
  std::vector<std::pair<std::string, json_node>> string_elements() const;

 private:
  json_node(const located_json* doc, const nlohmann::json* value, std::string pointer,
            std::string key, int fallback_line);

  const located_json* doc_;
  const nlohmann::json* value_;
  std::string pointer_;
  std::string key_;
  int line_;
};

}  // namespace broker::config
