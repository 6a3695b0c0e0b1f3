#include "http/message.hpp"

#include <algorithm>
#include <cctype>

namespace broker::http {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](unsigned char x, unsigned char y) {
           return std::tolower(x) == std::tolower(y);
         });
}

const std::string* message_head::find(std::string_view name) const {
  for (const auto& h : headers)
    if (iequals(h.name, name)) return &h.value;
  return nullptr;
}

bool message_head::has_token(std::string_view name, std::string_view token) const {
  for (const auto& h : headers) {
    if (!iequals(h.name, name)) continue;
    std::string_view list = h.value;
    while (!list.empty()) {
      const auto comma = list.find(',');
      std::string_view item = list.substr(0, comma);
      while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
      while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
      if (iequals(item, token)) return true;
      if (comma == std::string_view::npos) break;
      list.remove_prefix(comma + 1);
    }
  }
  return false;
}

namespace {

void append_headers(std::string& out, const message_head& head) {
  for (const auto& h : head.headers) {
    if (is_hop_by_hop(h.name, head)) continue;
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
  static constexpr std::string_view fixed[] = {
      "connection",         "keep-alive", "proxy-connection", "proxy-authorization",
      "proxy-authenticate", "te",         "upgrade"};
  for (auto f : fixed)
    if (iequals(name, f)) return true;
  // Names listed in Connection are hop-by-hop too; framing headers are never dropped this way
  // (we relay the body as framed, so its framing header must go with it).
  if (iequals(name, "content-length") || iequals(name, "transfer-encoding")) return false;
  return head.has_token("connection", name);
}

}  // namespace broker::http
