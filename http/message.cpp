#include "http/message.hpp"

#include <algorithm>
#include <cstdio>
#include <iterator>

namespace broker::http {

namespace {

// ASCII case folding (RFC 9110 §5.1), inline: std::tolower is a call per byte and consults the
// locale, and names are compared several times for every header of every message.
constexpr unsigned char fold(unsigned char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<unsigned char>(c | 0x20) : c;
}

}  // namespace

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(),
                    [](unsigned char x, unsigned char y) { return fold(x) == fold(y); });
}

const std::string* message_head::find(std::string_view name) const {
  for (const auto& h : headers)
    if (iequals(h.name, name)) return &h.value;
  return nullptr;
}

namespace {

// Calls `each(element)` for the elements of a comma-separated list (RFC 9110 §5.6.1), trimmed,
// empty ones skipped; stops early when `each` returns true.
template <class Each>
bool for_each_element(std::string_view list, Each each) {
  while (!list.empty()) {
    const auto comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    if (!item.empty() && each(item)) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

}  // namespace

void message_head::fit() {
  // Moved into a block with room for two more fields: a proxy adds one or two to a request
  // (Accept-Encoding: identity), which would otherwise double the block. A head with two or
  // three spare stays where it is.
  constexpr std::size_t spare = 2;
  const std::size_t room = headers.capacity() - headers.size();
  if (room >= spare && room <= spare + 1) return;
  std::vector<header_field> fitted;
  fitted.reserve(headers.size() + spare);
  std::move(headers.begin(), headers.end(), std::back_inserter(fitted));
  headers.swap(fitted);
}

bool message_head::has_token(std::string_view name, std::string_view token) const {
  for (const auto& h : headers) {
    if (!iequals(h.name, name)) continue;
    if (for_each_element(h.value, [token](std::string_view item) { return iequals(item, token); }))
      return true;
  }
  return false;
}

std::vector<std::string_view> message_head::list(std::string_view name) const {
  std::vector<std::string_view> out;
  for (const auto& h : headers) {
    if (!iequals(h.name, name)) continue;
    for_each_element(h.value, [&out](std::string_view item) {
      out.push_back(item);
      return false;
    });
  }
  return out;
}

std::string coded_body(const message_head& head) {
  auto join = [](const std::vector<std::string_view>& codings) {
    std::string out;
    for (std::string_view c : codings) out.append(out.empty() ? "" : ", ").append(c);
    return out;
  };
  const auto content = head.list("content-encoding");
  for (std::string_view c : content)
    if (!iequals(c, "identity")) return "Content-Encoding: " + join(content);
  const auto transfer = head.list("transfer-encoding");
  if (!transfer.empty() && (transfer.size() != 1 || !iequals(transfer.front(), "chunked")))
    return "Transfer-Encoding: " + join(transfer);
  return {};
}

bool is_hop_by_hop_field(std::string_view name) {
  static constexpr std::string_view fixed[] = {
      "connection",         "keep-alive", "proxy-connection", "proxy-authorization",
      "proxy-authenticate", "te",         "upgrade"};
  for (auto f : fixed)
    if (iequals(name, f)) return true;
  return false;
}

namespace {

// Names listed in Connection are hop-by-hop too; framing headers are never dropped this way
// (we relay the body as framed, so its framing header must go with it).
bool never_listed(std::string_view name) {
  return iequals(name, "content-length") || iequals(name, "transfer-encoding");
}

void append_headers(std::string& out, const message_head& head) {
  // The names Connection lists, gathered once rather than looked up for every field.
  const std::vector<std::string_view> listed = head.list("connection");
  const auto is_listed = [&listed](std::string_view name) {
    return std::any_of(listed.begin(), listed.end(),
                       [name](std::string_view item) { return iequals(item, name); });
  };
  for (const auto& h : head.headers) {
    if (is_hop_by_hop_field(h.name) || (!never_listed(h.name) && is_listed(h.name))) continue;
    out.append(h.name).append(": ").append(h.value).append("\r\n");
  }
}

}  // namespace

std::string serialize_request_head(const message_head& head, std::string_view target) {
  std::string out;
  out.reserve(256 + head.headers.size() * 48);
  // An HTTP/1.0 client's request goes up as 1.0, so that the upstream answers in a form the
  // client can read (no chunked coding, RFC 9112 §7.1).
  out.append(head.method).append(" ").append(target);
  out.append(head.version_major == 1 && head.version_minor == 0 ? " HTTP/1.0\r\n"
                                                                : " HTTP/1.1\r\n");
  append_headers(out, head);
  out.append("\r\n");
  return out;
}

std::string serialize_response_head(const message_head& head) {
  std::string out;
  out.reserve(256 + head.headers.size() * 48);
  out.append("HTTP/1.1 ").append(std::to_string(head.status)).append(" ");
  out.append(head.reason).append("\r\n");
  append_headers(out, head);
  out.append("\r\n");
  return out;
}

bool is_hop_by_hop(std::string_view name, const message_head& head) {
  if (is_hop_by_hop_field(name)) return true;
  return !never_listed(name) && head.has_token("connection", name);
}

void append_chunk_size(std::string& wire, std::size_t size) {
  char line[24];
  const int n = std::snprintf(line, sizeof line, "%zx\r\n", size);
  wire.append(line, static_cast<std::size_t>(n));
}

void frame_body(std::string& wire, std::string_view data, bool chunked, bool last) {
  if (!chunked) {
    wire.append(data);
    return;
  }
  if (!data.empty()) {
    append_chunk_size(wire, data.size());
    wire.append(data).append("\r\n");
  }
  if (last) wire.append("0\r\n\r\n");
}

std::string_view status_text(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 101:
      return "Switching Protocols";
    case 103:
      return "Early Hints";
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 202:
      return "Accepted";
    case 203:
      return "Non-Authoritative Information";
    case 204:
      return "No Content";
    case 205:
      return "Reset Content";
    case 206:
      return "Partial Content";
    case 300:
      return "Multiple Choices";
    case 301:
      return "Moved Permanently";
    case 302:
      return "Found";
    case 303:
      return "See Other";
    case 304:
      return "Not Modified";
    case 307:
      return "Temporary Redirect";
    case 308:
      return "Permanent Redirect";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 402:
      return "Payment Required";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 406:
      return "Not Acceptable";
    case 407:
      return "Proxy Authentication Required";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 410:
      return "Gone";
    case 411:
      return "Length Required";
    case 412:
      return "Precondition Failed";
    case 413:
      return "Content Too Large";
    case 414:
      return "URI Too Long";
    case 415:
      return "Unsupported Media Type";
    case 416:
      return "Range Not Satisfiable";
    case 417:
      return "Expectation Failed";
    case 421:
      return "Misdirected Request";
    case 422:
      return "Unprocessable Content";
    case 425:
      return "Too Early";
    case 426:
      return "Upgrade Required";
    case 428:
      return "Precondition Required";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 451:
      return "Unavailable For Legal Reasons";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "";
  }
}

}  // namespace broker::http
