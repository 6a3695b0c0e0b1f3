// STS AssumeRole: the signed request and its answer (aws_assume_role.hpp).
#include "brokers/aws_assume_role.hpp"

#include <openssl/rand.h>

#include <ctime>
#include <optional>
#include <stdexcept>

#include "base/digest.hpp"
#include "base/text.hpp"
#include "brokers/provider_text.hpp"
#include "brokers/sigv4.hpp"

namespace broker::brokers {
namespace {

using clock = std::chrono::system_clock;

std::string amz_date(clock::time_point now) {
  const std::time_t t = clock::to_time_t(now);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char out[17];
  std::strftime(out, sizeof out, "%Y%m%dT%H%M%SZ", &tm);
  return out;
}

// The text of the first <name>...</name> in `xml`, or nullopt.
std::optional<std::string> element(std::string_view xml, std::string_view name) {
  const std::string open = "<" + std::string(name) + ">", close = "</" + std::string(name) + ">";
  const auto at = xml.find(open);
  if (at == std::string_view::npos) return std::nullopt;
  const auto end = xml.find(close, at + open.size());
  if (end == std::string_view::npos) return std::nullopt;
  return std::string(xml.substr(at + open.size(), end - at - open.size()));
}

}  // namespace

std::string new_role_session_name() {
  unsigned char bytes[8];
  if (RAND_bytes(bytes, sizeof bytes) != 1) throw std::runtime_error("no random bytes");
  static constexpr char digits[] = "0123456789abcdef";
  std::string name = "broker-";
  for (unsigned char b : bytes) {
    name += digits[b >> 4];
    name += digits[b & 15];
  }
  return name;
}

provider_request assume_role_request(const config::assume_role_spec& role,
                                     const aws_credentials& long_lived,
                                     std::string_view session_name, clock::time_point now) {
  std::string body =
      "Action=AssumeRole&Version=2011-06-15&RoleArn=" + base::percent_encode(role.arn) +
      "&RoleSessionName=" + base::percent_encode(session_name) +
      "&DurationSeconds=" + std::to_string(role.duration.count());
  if (!role.policy.empty()) body += "&Policy=" + base::percent_encode(role.policy);
  const std::string date = amz_date(now);
  const sigv4::credential_scope scope{date.substr(0, 8), "us-east-1", "sts"};
  std::vector<http::header_field> headers{
      {"content-type", "application/x-www-form-urlencoded; charset=utf-8"},
      {"host", "sts.amazonaws.com"},
      {"x-amz-date", date}};
  if (!long_lived.session_token.empty())
    headers.push_back({"x-amz-security-token", std::string(long_lived.session_token.expose())});
  std::vector<std::string> signed_headers;
  for (const auto& h : headers) signed_headers.push_back(h.name);
  const std::string canonical = sigv4::canonical_request("POST", "/", headers, signed_headers,
                                                         base::sha256_hex(body), "sts", false);
  const sigv4::signing_key key(long_lived.secret_access_key.expose(), scope);
  sigv4::authorization a;
  a.credential = {std::string(long_lived.access_key_id.expose()), scope};
  a.signed_headers = signed_headers;
  a.signature = key.sign(sigv4::string_to_sign(date, scope, canonical));
  provider_request request{"POST", std::string(sts_endpoint), {}, std::move(body)};
  request.headers.emplace_back("Authorization", sigv4::format_authorization(a));
  for (auto& h : headers)
    if (h.name != "host") request.headers.emplace_back(h.name, std::move(h.value));
  request.headers.emplace_back("Accept", "text/xml");
  return request;
}

aws_real_credentials parse_assume_role_answer(const provider_answer& answer) {
  const std::string_view xml = answer.body;
  if (answer.status != 200) {
    const std::string code = element(xml, "Code").value_or("no code");
    const std::string message = element(xml, "Message").value_or("no message");
    throw mint_error(answer.status, "STS refused AssumeRole: " + printable_excerpt(code) + ": " +
                                        printable_excerpt(message));
  }
  auto key_id = element(xml, "AccessKeyId");
  auto secret = element(xml, "SecretAccessKey");
  auto token = element(xml, "SessionToken");
  auto expiration = element(xml, "Expiration");
  std::optional<clock::time_point> expires;
  if (expiration) expires = parse_utc_time(*expiration);
  if (!key_id || !secret || !token || !expires || key_id->empty() || secret->empty() ||
      token->empty()) {
    for (auto* s : {&key_id, &secret, &token})
      if (*s) base::wipe(**s);
    throw mint_error(answer.status, "STS's AssumeRole answer holds no credentials and expiry");
  }
  aws_real_credentials c;
  c.key_id = base::secret(std::move(*key_id));
  c.secret_key = base::secret(std::move(*secret));
  c.token = base::secret(std::move(*token));
  c.expires = *expires;
  return c;
}

}  // namespace broker::brokers
