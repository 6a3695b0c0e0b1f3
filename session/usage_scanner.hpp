// Finding a usage object in a JSON body too large to parse.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace broker::session {

// Follows a JSON text character by character, fed in pieces split anywhere, and keeps only
// what usage accounting needs: the text of the last object under a "usage" (Gemini:
// "usageMetadata") key, the first top-level "model" ("modelVersion") string, and how many bytes
// string values hold. It tracks strings and
// escapes from the first byte, so a "usage" inside generated text (where its quotes are
// escaped) is never mistaken for the key. It does not validate: on garbage it finds garbage,
// which the caller's JSON parse of last_usage() rejects.
class usage_scanner {
 public:
  // A usage object is a handful of counters (OpenAI adds some *_details); larger is not one.
  static constexpr std::size_t max_usage_object = 64 * 1024;
  static constexpr std::size_t max_model_name = 256;

  void scan(std::string_view text);

  // "" until a whole usage object (within max_usage_object) has passed.
  const std::string& last_usage() const { return last_usage_; }
  // The model string's raw contents, escapes undecoded; at most max_model_name bytes.
  const std::string& raw_model() const { return model_; }
  // Bytes inside string values (not keys), escapes as written: the generated text, roughly.
  std::uint64_t value_bytes() const { return value_bytes_; }

 private:
  enum class key { other, usage, model };

  void step(char c);
  // One byte inside a string; one outside (a bracket, a brace, a quote opening a string).
  void string_step(char c);
  void structure_step(char c);
  void end_string();

  std::string last_usage_;
  std::string capture_;  // the usage object being read
  std::string model_;
  std::string head_;  // a string's first bytes, enough to tell the keys looked for
  std::uint64_t value_bytes_ = 0;
  std::uint64_t string_len_ = 0;
  std::size_t depth_ = 0;          // open objects and arrays
  std::size_t capture_depth_ = 0;  // depth_ outside the captured object
  key pending_key_ = key::other;   // the string just closed, if a ':' follows
  key expected_ = key::other;      // the value about to start belongs to this key
  bool in_string_ = false;
  bool escaped_ = false;
  bool string_pending_ = false;  // a string closed; the next token says key or value
  bool capturing_usage_ = false;
  bool capturing_model_ = false;
  bool model_seen_ = false;
};

}  // namespace broker::session
