#include "session/usage_scanner.hpp"

#include <utility>

namespace broker::session {

void usage_scanner::scan(std::string_view text) {
  for (const char c : text) step(c);
}

void usage_scanner::step(char c) {
  if (capturing_usage_) {
    if (capture_.size() < max_usage_object) {
      capture_.push_back(c);
    } else {
      capturing_usage_ = false;  // too big to be a usage object; the last whole one stands
      std::string().swap(capture_);
    }
  }

  if (in_string_) {
    string_step(c);
    return;
  }
  if (c == ' ' || c == '\t' || c == '\n' || c == '\r') return;
  if (string_pending_) {
    string_pending_ = false;
    if (c == ':') {
      expected_ = pending_key_;
      return;
    }
    value_bytes_ += string_len_;
  }
  structure_step(c);
}

void usage_scanner::string_step(char c) {
  if (escaped_) {
    escaped_ = false;
  } else if (c == '\\') {
    escaped_ = true;
  } else if (c == '"') {
    in_string_ = false;
    end_string();
    return;
  }
  ++string_len_;
  if (head_.size() < 14) head_.push_back(c);
  if (capturing_model_ && model_.size() < max_model_name) model_.push_back(c);
}

void usage_scanner::structure_step(char c) {
  const key expected = std::exchange(expected_, key::other);
  switch (c) {
    case '"':
      in_string_ = true;
      string_len_ = 0;
      head_.clear();
      // Only the response's own model: a top-level member, the first one.
      capturing_model_ = expected == key::model && depth_ == 1 && !model_seen_;
      break;
    case '{':
      if (expected == key::usage && !capturing_usage_) {
        capturing_usage_ = true;
        capture_.assign(1, '{');
        capture_depth_ = depth_;
      }
      ++depth_;
      break;
    case '[':
      ++depth_;
      break;
    case '}':
    case ']':
      if (depth_ > 0) --depth_;
      if (capturing_usage_ && depth_ == capture_depth_) {
        capturing_usage_ = false;
        last_usage_.swap(capture_);
        capture_.clear();
      }
      break;
    default:
      break;
  }
}

void usage_scanner::end_string() {
  if (capturing_model_) {
    capturing_model_ = false;
    model_seen_ = true;
  }
  string_pending_ = true;
  pending_key_ = key::other;
  // "usageMetadata" and "modelVersion" are Gemini's names.
  if ((string_len_ == 5 && head_ == "usage") || (string_len_ == 13 && head_ == "usageMetadata"))
    pending_key_ = key::usage;
  if ((string_len_ == 5 && head_ == "model") || (string_len_ == 12 && head_ == "modelVersion"))
    pending_key_ = key::model;
}

}  // namespace broker::session
