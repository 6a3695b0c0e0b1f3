// Redis URL parsing. Error messages name the part that is wrong, never the URL itself: it may
// hold the password.
#include "gateway/redis/redis_endpoint.hpp"

#include <charconv>
#include <stdexcept>

#include "base/text.hpp"

namespace broker::gateway {
namespace {

[[noreturn]] void bad(const std::string& why) {
  throw std::invalid_argument("redis URL: " + why);
}

// RFC 3986 §2.1. `what` names the part in an error ("the password"); its bytes are not quoted.
std::string decode_part(std::string_view in, const char* what) {
  std::string out;
  out.reserve(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out += in[i];
      continue;
    }
    const int byte = base::escaped_byte(in, i);
    if (byte < 0) {
      base::wipe(out);
      bad(std::string("a bad percent-escape in ") + what);
    }
    out += static_cast<char>(byte);
    i += 2;
  }
  return out;
}

// The text is not quoted in the error: a password with an unencoded '/' would land here.
unsigned parse_number(std::string_view text, unsigned max, const std::string& what) {
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value > max)
    bad(what + " is not a number from 0 to " + std::to_string(max));
  return value;
}

// `[user]:password` (percent-encoded) into the endpoint. A bare `user@` is refused: some clients
// read it as a user, others as a password.
void parse_userinfo(std::string_view info, redis_endpoint& out) {
  const std::size_t colon = info.find(':');
  if (colon == std::string_view::npos)
    bad("the part before '@' must be :password or user:password");
  out.user = decode_part(info.substr(0, colon), "the user");
  std::string password = decode_part(info.substr(colon + 1), "the password");
  if (password.empty()) bad("the password after ':' is empty");
  out.password = std::make_shared<const base::secret>(std::move(password));
}

void parse_tcp(std::string_view rest, redis_endpoint& out) {
  if (rest.find_first_of("?#") != std::string_view::npos)
    bad("redis:// takes no query or fragment (the db goes in the path: redis://host:6379/2)");
  const std::size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  const std::string_view path =
      slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
  if (const std::size_t at = authority.rfind('@'); at != std::string_view::npos) {
    parse_userinfo(authority.substr(0, at), out);
    authority = authority.substr(at + 1);
  }
  std::string_view port;
  if (authority.starts_with('[')) {
    const std::size_t close = authority.find(']');
    if (close == std::string_view::npos) bad("an IPv6 host has no closing ']'");
    out.host = std::string(authority.substr(1, close - 1));
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty() && !after.starts_with(':')) bad("unexpected text after the IPv6 host");
    if (!after.empty()) port = after.substr(1);
    if (!after.empty() && port.empty()) bad("the port after ':' is empty");
  } else {
    const std::size_t colon = authority.find(':');
    if (colon != std::string_view::npos && authority.find(':', colon + 1) != std::string_view::npos)
      bad("an IPv6 host must be in brackets: redis://[::1]:6379");
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port = authority.substr(colon + 1);
      if (port.empty()) bad("the port after ':' is empty");
    }
  }
  if (out.host.empty()) bad("no host");
  if (!port.empty()) {
    out.port = static_cast<std::uint16_t>(parse_number(port, 65535, "the port"));
    if (out.port == 0) bad("the port must not be 0");
  }
  if (!path.empty()) out.db = parse_number(path, 1u << 30, "the db");
}

void parse_unix(std::string_view rest, redis_endpoint& out) {
  out.kind = redis_endpoint::transport::unix_socket;
  if (rest.find('#') != std::string_view::npos) bad("unix:// takes no fragment");
  // unix://:password@/path: the user info ends at the "@/" that starts the path.
  if (!rest.starts_with('/')) {
    const std::size_t at = rest.find("@/");
    if (at == std::string_view::npos)
      bad("unix:// needs an absolute socket path: unix:///run/redis.sock");
    parse_userinfo(rest.substr(0, at), out);
    rest = rest.substr(at + 1);
  }
  const std::size_t question = rest.find('?');
  out.path = decode_part(rest.substr(0, question), "the socket path");
  if (out.path.size() <= 1) bad("unix:// needs a socket path");
  if (question == std::string_view::npos) return;
  std::string_view query = rest.substr(question + 1);
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (!pair.starts_with("db="))
      bad("unix:// knows only the query parameter db (unix:///run/redis.sock?db=2)");
    out.db = parse_number(pair.substr(3), 1u << 30, "the db");
  }
}

}  // namespace

redis_endpoint redis_endpoint::parse(std::string_view url) {
  redis_endpoint out;
  if (url.starts_with("redis://")) {
    parse_tcp(url.substr(8), out);
  } else if (url.starts_with("unix://")) {
    parse_unix(url.substr(7), out);
  } else if (url.starts_with("redis+unix://")) {
    parse_unix(url.substr(13), out);
  } else if (url.starts_with("rediss://")) {
    bad("rediss:// (Redis over TLS) is not supported; use redis:// or unix://");
  } else {
    bad("the scheme must be redis://, unix:// or redis+unix://");
  }
  return out;
}

std::string redis_endpoint::display() const {
  const std::string user_part = user.empty() ? "" : base::percent_encode(user) + "@";
  if (kind == transport::unix_socket)
    return "unix://" + user_part + path + (db != 0 ? "?db=" + std::to_string(db) : "");
  const bool v6 = host.find(':') != std::string::npos;
  return "redis://" + user_part + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port) +
         "/" + std::to_string(db);
}

}  // namespace broker::gateway
