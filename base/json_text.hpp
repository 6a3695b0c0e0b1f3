// JSON written straight into a string, for the records written on every request (the audit log):
// a JSON library's document tree costs an allocation per field, this costs one growing string.
// Text that is not valid UTF-8 (a host, path or exe name chosen by the child) is written with
// U+FFFD in place of each bad sequence, so the output is always valid JSON.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace broker::base {

// `text` as a JSON string, quotes included, appended to `out`.
void append_json_string(std::string& out, std::string_view text);

// The members of a JSON object, `"key":value,...`, without the braces, in the order added. Keys
// are the caller's literals and are written as given (escaped, like any string).
class json_members {
 public:
  // Room for an exchange's record at once (~500-900 bytes), rather than its growing by doubling.
  json_members() { text_.reserve(1024); }
  json_members& add(std::string_view key, std::string_view text);
  json_members& add(std::string_view key, const char* text) {
    return add(key, std::string_view(text));
  }
  json_members& add(std::string_view key, std::int64_t number);
  json_members& add(std::string_view key, std::uint64_t number);
  json_members& add(std::string_view key, int number) { return add(key, std::int64_t{number}); }
  json_members& add(std::string_view key, unsigned number) {
    return add(key, std::uint64_t{number});
  }
  json_members& add(std::string_view key, double number);  // shortest form; non-finite: null
  json_members& add(std::string_view key, bool value);
  json_members& add_null(std::string_view key);
  // A string, or null when `text` is empty.
  json_members& add_text_or_null(std::string_view key, std::string_view text);
  // Any JSON value (serialized as nlohmann does, with U+FFFD for bad UTF-8).
  json_members& add_json(std::string_view key, const nlohmann::ordered_json& value);

  const std::string& text() const { return text_; }
  bool empty() const { return text_.empty(); }

 private:
  void key(std::string_view k);
  std::string text_;
};

}  // namespace broker::base
