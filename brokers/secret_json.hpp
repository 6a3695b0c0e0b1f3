// A JSON document that carries secret values (process credentials, a service-account key, a token
// response). nlohmann::json copies every string it parses, and its parse errors quote the input;
// this wrapper reports syntax errors by position only, moves secret strings out into `secret`s,
// and zeroes every string still in the document when it goes away.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>

#include "base/secret.hpp"

namespace broker::brokers {

class secret_json {
 public:
  // Parses `text`, which must be one JSON object. Throws source_error "<what>: ..." naming the
  // byte offset of a syntax error, never the text around it. `text` stays the caller's to wipe.
  secret_json(std::string_view text, std::string_view what);
  ~secret_json();
  secret_json(const secret_json&) = delete;
  secret_json& operator=(const secret_json&) = delete;

  // The top-level member `key`, or nullptr when it is absent.
  const nlohmann::json* find(std::string_view key) const;

  // The string member `key` moved into a secret (the document's copy is wiped); nullopt when
  // absent or null. Throws source_error naming `key` when it is not a string.
  std::optional<base::secret> take_secret(std::string_view key);

  // A string member that is not secret (an e-mail address, a URL, a date); nullopt when absent
  // or null. Throws source_error naming `key` when it is not a string.
  std::optional<std::string> text(std::string_view key) const;

  // "<what>: <message>", for the callers' own errors about this document.
  std::string message(std::string_view message) const;

 private:
  nlohmann::json root_;
  std::string what_;
};

// Zeroes every string value in `value` and below (keys are left alone: they are field names).
void wipe_strings(nlohmann::json& value) noexcept;
void wipe_strings(nlohmann::ordered_json& value) noexcept;

}  // namespace broker::brokers
