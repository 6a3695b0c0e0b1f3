// An llhttp-backed HTTP/1.x message parser for one message (request or response). A new parser
// is made for every message (never reused half-read). It parses the head into fields, then
// only tracks framing of the body so the proxy can relay raw bytes and know where the message
// ends.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace broker::proxy {

struct header_field {
  std::string name;
  std::string value;
};

struct message_head {
  // Requests
  std::string method;
  std::string target;
  // Responses
  int status = 0;
  std::string reason;

  int version_major = 1;
  int version_minor = 1;
  std::vector<header_field> headers;
  bool keep_alive = true;  // llhttp_should_keep_alive after the head
  bool upgrade = false;
  bool has_body = false;  // Content-Length > 0, chunked, or (responses) read-until-close
  bool chunked = false;
  std::optional<std::uint64_t> content_length;

  // First value of a header, case-insensitive name.
  const std::string* find(std::string_view name) const;
  // Does any `name` header list `token` (a comma-separated list, case-insensitive)?
  bool has_token(std::string_view name, std::string_view token) const;
};

enum class parse_status {
  need_more,         // everything consumed, message not finished
  head_complete,     // head parsed; `consumed` bytes belong to the head
  message_complete,  // message ended; `consumed` bytes were part of it, the rest is not
  error,
};

// Why a message was refused; maps to DESIGN §6 codes.
enum class parse_error { none, bad_request, header_too_large };

class http_parser {
 public:
  enum class kind { request, response };
  // `head_of_request_method` for responses: "HEAD" responses have no body, and 1xx are interim.
  explicit http_parser(kind k, std::string_view request_method = {});
  ~http_parser();
  http_parser(const http_parser&) = delete;
  http_parser& operator=(const http_parser&) = delete;

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

// Serializes a head back to wire form ("METHOD target HTTP/1.1", or HTTP/1.0 for a 1.0
// request; responses always as HTTP/1.1), hop-by-hop headers dropped, ending with the blank line.
std::string serialize_request_head(const message_head& head, std::string_view target);
std::string serialize_response_head(const message_head& head);

// True for the hop-by-hop headers a proxy must not forward (RFC 9110 §7.6.1), including the
// names listed in `Connection` and the proxy's own Proxy-* headers. Framing headers
// (Content-Length, Transfer-Encoding) are kept: bodies are relayed as framed.
bool is_hop_by_hop(std::string_view name, const message_head& head);

bool iequals(std::string_view a, std::string_view b);

}  // namespace broker::proxy
