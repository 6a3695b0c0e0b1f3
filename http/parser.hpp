// An llhttp-backed HTTP/1.x message parser for one message (request or response). A new parser
// is made for every message (never reused half-read). It parses the head into fields, then
// only tracks framing of the body so the proxy can relay raw bytes and know where the message
// ends.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "http/message.hpp"

namespace broker::http {

enum class parse_status {
  need_more,         // everything consumed, message not finished
  head_complete,     // head parsed; `consumed` bytes belong to the head
  message_complete,  // message ended; `consumed` bytes were part of it, the rest is not
  error,
};

// Why a message was refused; maps to docs/cli.md codes.
enum class parse_error { none, bad_request, header_too_large };

class parser {
 public:
  enum class kind { request, response };
  // `head_of_request_method` for responses: "HEAD" responses have no body, and 1xx are interim.
  explicit parser(kind k, std::string_view request_method = {});
  ~parser();
  parser(const parser&) = delete;
  parser& operator=(const parser&) = delete;

  struct result {
    parse_status status;
    std::size_t consumed;
  };
  // Feeds bytes. Before head_complete the head is parsed; afterwards framing is tracked and,
  // with `body`, the decoded body bytes (chunk framing removed) of this feed are appended to it.
  result feed(std::string_view data, std::string* body = nullptr);
  // The peer closed: completes a read-until-close body; otherwise an error if mid-message.
  result finish();

  const message_head& head() const { return head_; }
  message_head& head() { return head_; }
  parse_error error() const { return error_; }
  const std::string& error_reason() const { return error_reason_; }
  // Both false once error() is set: nothing of a refused message counts as complete, even a head
  // llhttp finished before the error (head() keeps whatever was parsed, for logging only).
  bool head_done() const { return head_done_; }
  bool message_done() const { return message_done_; }
  bool keep_alive() const;  // valid after message_complete

 private:
  struct impl;
  friend struct impl;
  result fail(parse_error e, std::string reason, std::size_t consumed);

  std::unique_ptr<impl> impl_;
  message_head head_;
  parse_error error_ = parse_error::none;
  std::string error_reason_;
  std::size_t head_bytes_ = 0;
  bool head_done_ = false;
  bool message_done_ = false;
  bool is_request_;
  bool head_request_ = false;
};

}  // namespace broker::http
