// SigV4's request-text parsers and canonical forms (brokers/sigv4.hpp, base/text.hpp). The
// whole input is tried as an Authorization value, a credential and a presigned target; read as
// lines (method, target, SignedHeaders, payload hash, then "name:value" fields) it is also
// canonicalized. sigv4_error is the documented refusal; any other exception is a finding.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/text.hpp"
#include "brokers/sigv4.hpp"
#include "fuzz_support.hpp"
#include "http/message.hpp"

namespace {

using namespace broker;
namespace sigv4 = brokers::sigv4;
using fuzz::check;

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  for (;;) {
    const std::size_t at = s.find(sep);
    parts.push_back(s.substr(0, at));
    if (at == std::string_view::npos) return parts;
    s.remove_prefix(at + 1);
  }
}

bool is_unreserved(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == '~';
}

// Only unreserved characters (and '/' with keep_slash) and %XX with upper-case hex digits.
bool is_percent_encoded(std::string_view s, bool keep_slash) {
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (is_unreserved(s[i]) || (keep_slash && s[i] == '/')) continue;
    if (s[i] != '%' || i + 2 >= s.size()) return false;
    for (char h : s.substr(i + 1, 2))
      if (!((h >= '0' && h <= '9') || (h >= 'A' && h <= 'F'))) return false;
    i += 2;
  }
  return true;
}

bool same_credential(const sigv4::credential_field& a, const sigv4::credential_field& b) {
  return a.access_key_id == b.access_key_id && a.scope.date == b.scope.date &&
         a.scope.region == b.scope.region && a.scope.service == b.scope.service;
}

void check_authorization(std::string_view value) {
  const auto parsed = sigv4::parse_authorization(value);
  if (!parsed) return;
  check(base::is_signature(parsed->signature), "accepted a malformed Signature");
  check(std::is_sorted(parsed->signed_headers.begin(), parsed->signed_headers.end()),
        "accepted unsorted SignedHeaders");
  // The re-signed request carries format_authorization's text; it must mean the same.
  const auto again = sigv4::parse_authorization(sigv4::format_authorization(*parsed));
  check(again.has_value(), "format_authorization wrote a value that does not parse");
  check(same_credential(again->credential, parsed->credential) &&
            again->signed_headers == parsed->signed_headers &&
            again->signature == parsed->signature,
        "format_authorization changed the authorization");
}

void check_presigned(std::string_view target) {
  try {
    const auto q = sigv4::parse_presigned(target);
    if (!q) return;
    check(base::is_signature(q->signature), "accepted a malformed X-Amz-Signature");
    check(sigv4::is_amz_date(q->amz_date), "accepted a malformed X-Amz-Date");
  } catch (const sigv4::sigv4_error&) {
  }
}

// The canonical request's documented shape: for services other than s3 the URI has no empty,
// "." or ".." segment and is encoded; the query is encoded pairs sorted by name, then value.
void check_canonical_shape(std::string_view canonical, std::string_view service, bool presigned) {
  const std::vector<std::string_view> lines = split(canonical, '\n');
  check(lines.size() >= 6, "canonical request has too few lines");
  const std::string_view uri = lines[1];
  if (service != "s3") {  // s3's is the path as sent
    check(!uri.empty() && uri.front() == '/', "canonical URI does not start with '/'");
    check(is_percent_encoded(uri, /*keep_slash=*/true), "canonical URI is not encoded");
    const std::vector<std::string_view> segments = split(uri.substr(1), '/');
    for (std::size_t i = 0; i < segments.size(); ++i) {
      const bool last = i + 1 == segments.size();
      check(!segments[i].empty() || last, "canonical URI has an empty segment");
      check(segments[i] != "." && segments[i] != "..", "canonical URI has a dot segment");
    }
  }
  const std::string_view query = lines[2];
  if (query.empty()) return;
  std::vector<std::pair<std::string_view, std::string_view>> params;
  for (std::string_view pair : split(query, '&')) {
    const std::size_t eq = pair.find('=');
    check(eq != std::string_view::npos, "canonical query parameter without '='");
    const std::string_view name = pair.substr(0, eq), value = pair.substr(eq + 1);
    check(is_percent_encoded(name, false) && is_percent_encoded(value, false),
          "canonical query is not encoded");
    check(!presigned || name != "X-Amz-Signature", "presigned canonical query kept the signature");
    params.emplace_back(name, value);
  }
  check(std::is_sorted(params.begin(), params.end()), "canonical query is not sorted");
}

void check_canonical_request(std::string_view input) {
  const std::vector<std::string_view> lines = split(input, '\n');
  auto line = [&lines](std::size_t i) { return i < lines.size() ? lines[i] : std::string_view(); };
  std::vector<std::string> signed_headers;
  for (std::string_view name : split(line(2), ';')) signed_headers.emplace_back(name);
  std::vector<http::header_field> headers;
  for (std::size_t i = 4; i < lines.size(); ++i) {
    const std::size_t colon = lines[i].find(':');
    headers.push_back(
        {std::string(lines[i].substr(0, colon)),
         colon == std::string_view::npos ? "" : std::string(lines[i].substr(colon + 1))});
  }
  const std::uint64_t choice = fuzz::hash_of(input);
  const std::string_view service = choice & 1 ? "s3" : "iam";
  const bool presigned = (choice & 2) != 0;
  try {
    const std::string canonical = sigv4::canonical_request(
        line(0), line(1), headers, signed_headers, line(3), service, presigned);
    check_canonical_shape(canonical, service, presigned);
    const sigv4::credential_scope scope{"20240101", "us-east-1", std::string(service)};
    (void)sigv4::string_to_sign("20240101T000000Z", scope, canonical);
  } catch (const sigv4::sigv4_error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input = fuzz::as_text(data, size);
  check_authorization(input);
  if (const auto credential = sigv4::parse_credential(input))
    check(credential->scope.date.size() == 8, "accepted a credential date that is not 8 digits");
  (void)sigv4::is_amz_date(input);
  check_presigned(input);
  check_canonical_request(input);

  const std::string encoded = base::percent_encode(input);
  check(is_percent_encoded(encoded, false), "percent_encode left a reserved character");
  check(base::percent_decode(encoded) == input, "percent_decode(percent_encode(x)) != x");
  return 0;
}
