#include "http/parser.hpp"

#include <llhttp.h>

#include <array>

#include "http/limits.hpp"

namespace broker::http {

namespace {

// RFC 9110 §5.6.2 token characters, as a table: every header name of every message is checked.
constexpr std::array<bool, 256> token_chars = [] {
  std::array<bool, 256> t{};
  for (int c = '0'; c <= '9'; ++c) t[c] = true;
  for (int c = 'a'; c <= 'z'; ++c) t[c] = t[c - 'a' + 'A'] = true;
  for (unsigned char c : std::string_view("!#$%&'*+-.^_`|~")) t[c] = true;
  return t;
}();

bool is_token(std::string_view s) {
  if (s.empty()) return false;
  for (unsigned char c : s)
    if (!token_chars[c]) return false;
  return true;
}

}  // namespace

struct parser::impl {
  llhttp_t state{};
  llhttp_settings_t settings{};
  parser* owner = nullptr;
  std::string field;
  std::string value;
  bool in_value = false;
  std::size_t field_limit = 0;
  const char* user_error = nullptr;  // set by a callback that refuses the message
  parse_error user_error_kind = parse_error::bad_request;
  char prev_byte = 0;           // for obs-fold detection across feeds
  std::string* body = nullptr;  // where decoded body bytes go during one feed, if anywhere

  static impl& self(llhttp_t* p) { return *static_cast<impl*>(p->data); }

  static int on_url(llhttp_t* p, const char* at, std::size_t n) {
    self(p).owner->head_.target.append(at, n);
    return 0;
  }
  static int on_status(llhttp_t* p, const char* at, std::size_t n) {
    self(p).owner->head_.reason.append(at, n);
    return 0;
  }
  static int on_header_field(llhttp_t* p, const char* at, std::size_t n) {
    self(p).field.append(at, n);
    return 0;
  }
  static int on_header_value(llhttp_t* p, const char* at, std::size_t n) {
    self(p).value.append(at, n);
    return 0;
  }
  static int on_header_value_complete(llhttp_t* p) {
    impl& s = self(p);
    // llhttp accepts "Name : value"; RFC 9112 §5.1 says such a request must be rejected.
    if (!is_token(s.field)) {
      s.user_error = "invalid header field name";
      return -1;
    }
    if (s.owner->head_done_) {
      // A trailer section's field (after a chunked body): checked as a field, but not part of
      // the head, whose fields were final when it completed (a trailing Content-Length must not
      // read as the message's framing).
      s.field.clear();
      s.value.clear();
      return 0;
    }
    auto& headers = s.owner->head_.headers;
    if (headers.size() >= s.field_limit) {
      s.user_error = "too many header fields";
      s.user_error_kind = parse_error::header_too_large;
      return -1;
    }
    while (!s.value.empty() && (s.value.back() == ' ' || s.value.back() == '\t'))
      s.value.pop_back();
    headers.push_back({std::move(s.field), std::move(s.value)});
    s.field.clear();
    s.value.clear();
    return 0;
  }
  static int on_headers_complete(llhttp_t* p) {
    impl& s = self(p);
    parser& o = *s.owner;
    message_head& h = o.head_;
    h.version_major = p->http_major;
    h.version_minor = p->http_minor;
    h.keep_alive = llhttp_should_keep_alive(p) != 0;
    h.upgrade = p->upgrade != 0;
    h.chunked = (p->flags & F_CHUNKED) != 0;
    if (p->flags & F_CONTENT_LENGTH) h.content_length = p->content_length;
    h.fit();
    // Transfer codings, looked at once the head is whole (most messages have none).
    if (h.find("transfer-encoding")) {
      const auto codings = h.list("transfer-encoding");
      // llhttp does not frame "chunked<TAB>" or "chunked," as chunked, while the field goes to
      // the next hop trimmed, as "chunked": the two would disagree on where the message ends
      // (RFC 9112 §11.2), so the message is refused.
      if (!h.chunked && !codings.empty() && iequals(codings.back(), "chunked")) {
        s.user_error = "Transfer-Encoding is not framed as the chunked coding it names";
        return -1;
      }
      // RFC 9112 §6.1: a request whose final transfer coding is not chunked has no reliable
      // length (400). Any coding under the chunked one would hide the body from the broker's
      // checks, and clients send none, so only "chunked" alone is accepted.
      if (o.is_request_ && (codings.size() != 1 || !iequals(codings.front(), "chunked"))) {
        s.user_error = "a request's Transfer-Encoding must be \"chunked\" alone";
        return -1;
      }
    }
    if (o.is_request_) {
      h.method = llhttp_method_name(static_cast<llhttp_method_t>(p->method));
      // Only CONNECT hands the connection over; an Upgrade request is relayed as a plain
      // request, so its body (if any) must be framed like any other.
      const bool connect = p->method == HTTP_CONNECT;
      h.has_body = !connect && (h.chunked || h.content_length.value_or(0) > 0);
    } else {
      h.status = p->status_code;
      const bool no_body = o.head_request_ || h.status < 200 || h.status == 204 ||
                           h.status == 304 || (!h.chunked && h.content_length == 0u);
      h.has_body = !no_body;
    }
    o.head_done_ = true;
    if (!h.has_body) o.message_done_ = true;
    return HPE_PAUSED;
  }
  static int on_body(llhttp_t* p, const char* at, std::size_t n) {
    if (auto* body = self(p).body) body->append(at, n);
    return 0;
  }
  static int on_message_complete(llhttp_t* p) {
    self(p).owner->message_done_ = true;
    return HPE_PAUSED;
  }
};

parser::parser(kind k, std::string_view request_method)
    : impl_(std::make_unique<impl>()), is_request_(k == kind::request) {
  head_request_ = !is_request_ && request_method == "HEAD";
  impl& s = *impl_;
  s.owner = this;
  head_.headers.reserve(16);  // a usual head's fields in one allocation rather than five
  s.field_limit = is_request_ ? limits::max_header_fields : limits::max_response_header_fields;
  llhttp_settings_init(&s.settings);
  s.settings.on_url = &impl::on_url;
  s.settings.on_status = &impl::on_status;
  s.settings.on_header_field = &impl::on_header_field;
  s.settings.on_header_value = &impl::on_header_value;
  s.settings.on_header_value_complete = &impl::on_header_value_complete;
  s.settings.on_headers_complete = &impl::on_headers_complete;
  s.settings.on_body = &impl::on_body;
  s.settings.on_message_complete = &impl::on_message_complete;
  llhttp_init(&s.state, is_request_ ? HTTP_REQUEST : HTTP_RESPONSE, &s.settings);
  s.state.data = &s;
}

parser::~parser() = default;

parser::result parser::fail(parse_error e, std::string reason, std::size_t consumed) {
  // The callbacks may have completed the head (or a bodiless message) of bytes refused after
  // llhttp ran (obs-fold, the head limit), or completed the head before the body failed: none of
  // it may read as done.
  head_done_ = false;
  message_done_ = false;
  error_ = e;
  error_reason_ = std::move(reason);
  return {parse_status::error, consumed};
}

bool parser::keep_alive() const {
  return head_.keep_alive && !head_.upgrade;
}

parser::result parser::feed(std::string_view data, std::string* body) {
  if (error_ != parse_error::none) return {parse_status::error, 0};
  if (message_done_) return {parse_status::message_complete, 0};
  impl& s = *impl_;
  const bool was_head_done = head_done_;
  if (was_head_done && llhttp_get_errno(&s.state) == HPE_PAUSED) llhttp_resume(&s.state);

  s.body = body;
  const llhttp_errno_t rc = llhttp_execute(&s.state, data.data(), data.size());
  s.body = nullptr;
  std::size_t consumed = data.size();
  if (rc == HPE_PAUSED || rc == HPE_PAUSED_UPGRADE)
    consumed = static_cast<std::size_t>(llhttp_get_error_pos(&s.state) - data.data());

  if (!was_head_done) {
    const std::size_t head_part = consumed;
    // obs-fold (a header line starting with SP/HTAB) is refused, RFC 9112 §5.2: the byte after
    // each line feed, found with memchr rather than by looking at every byte.
    const auto folds = [](char c) { return c == ' ' || c == '\t'; };
    if (const std::string_view head = data.substr(0, head_part); !head.empty()) {
      if (s.prev_byte == '\n' && folds(head[0]))
        return fail(parse_error::bad_request, "obsolete line folding in header", 0);
      for (std::size_t at = head.find('\n'); at != std::string_view::npos && at + 1 < head.size();
           at = head.find('\n', at + 1)) {
        if (folds(head[at + 1]))
          return fail(parse_error::bad_request, "obsolete line folding in header", at + 1);
      }
      s.prev_byte = head.back();
    }
    head_bytes_ += head_part;
    const std::size_t limit =
        is_request_ ? limits::max_head_bytes : limits::max_response_head_bytes;
    if (head_bytes_ > limit)
      return fail(parse_error::header_too_large, "header too large", consumed);
  }

  if (rc != HPE_OK && rc != HPE_PAUSED && rc != HPE_PAUSED_UPGRADE) {
    if (s.user_error) return fail(s.user_error_kind, s.user_error, consumed);
    return fail(parse_error::bad_request, llhttp_get_error_reason(&s.state), consumed);
  }
  if (!was_head_done) {
    if (!head_done_) return {parse_status::need_more, consumed};
    return {parse_status::head_complete, consumed};
  }
  if (message_done_) return {parse_status::message_complete, consumed};
  return {parse_status::need_more, consumed};
}

parser::result parser::finish() {
  if (message_done_) return {parse_status::message_complete, 0};
  if (error_ != parse_error::none) return {parse_status::error, 0};
  impl& s = *impl_;
  if (!head_done_) return fail(parse_error::bad_request, "connection closed mid-head", 0);
  if (llhttp_get_errno(&s.state) == HPE_PAUSED) llhttp_resume(&s.state);
  const llhttp_errno_t rc = llhttp_finish(&s.state);
  if (message_done_) return {parse_status::message_complete, 0};
  if (rc != HPE_OK) return fail(parse_error::bad_request, llhttp_get_error_reason(&s.state), 0);
  return fail(parse_error::bad_request, "connection closed mid-message", 0);
}

}  // namespace broker::http
