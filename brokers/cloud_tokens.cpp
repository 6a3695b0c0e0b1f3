// OAuth access tokens: JWT bearer assertions from a service-account key (RFC 7523, RS256 per
// RFC 7518 §3.3) and the token responses and token-command outputs that carry the result.
#include "brokers/cloud_tokens.hpp"
#include "base/text.hpp"

#include <climits>
#include <ctime>
#include <memory>
#include <utility>

#include "brokers/jws.hpp"
#include "brokers/provider_text.hpp"
#include "brokers/secret_json.hpp"

namespace broker::brokers {
namespace {

using std::chrono::system_clock;

// Longest lifetime an issuer may claim; beyond it "expires_in" is taken to be garbage (and
// time_point arithmetic could overflow).
constexpr std::chrono::seconds max_lifetime = std::chrono::hours(24 * 366);
constexpr std::chrono::seconds default_oauth_lifetime{3600};  // RFC 6749 §5.1 leaves it optional
constexpr std::chrono::seconds assertion_lifetime{3600};      // Google's maximum

// ---- responses ----

// RFC 6749 §5.2: {"error": "invalid_grant", "error_description": "..."}.
void throw_if_oauth_error(const secret_json& doc) {
  const nlohmann::json* error = doc.find("error");
  if (error == nullptr || error->is_null()) return;
  std::string text = "the issuer refused";
  if (error->is_string()) text += ": " + printable_excerpt(error->get_ref<const std::string&>());
  const nlohmann::json* description = doc.find("error_description");
  if (description != nullptr && description->is_string())
    text += " (" + printable_excerpt(description->get_ref<const std::string&>()) + ")";
  throw source_error(doc.message(text));
}

// A whole number of seconds from a JSON number or a string of digits; nullopt otherwise.
std::optional<long long> whole_seconds(const nlohmann::json& value) {
  if (value.is_number_unsigned()) {
    const auto v = value.get<unsigned long long>();
    return v > LLONG_MAX ? std::nullopt : std::optional<long long>(static_cast<long long>(v));
  }
  if (value.is_number_integer()) return value.get<long long>();
  if (value.is_number_float()) {
    const double v = value.get<double>();
    if (!(v >= -9.0e15 && v <= 9.0e15)) return std::nullopt;  // also NaN
    return static_cast<long long>(v);
  }
  if (value.is_string()) {
    const std::string& s = value.get_ref<const std::string&>();
    if (s.empty() || s.size() > 18) return std::nullopt;
    long long v = 0;
    for (char c : s) {
      if (c < '0' || c > '9') return std::nullopt;
      v = v * 10 + (c - '0');
    }
    return v;
  }
  return std::nullopt;
}

// now + "expires_in", or now + `fallback` when the member is absent.
system_clock::time_point expires_in(const secret_json& doc, system_clock::time_point now,
                                    std::chrono::seconds fallback) {
  const nlohmann::json* value = doc.find("expires_in");
  if (value == nullptr || value->is_null()) return now + fallback;
  auto seconds = whole_seconds(*value);
  if (!seconds || *seconds < 0 || *seconds > max_lifetime.count())
    throw source_error(doc.message("\"expires_in\" is not a number of seconds"));
  return now + std::chrono::seconds(*seconds);
}

// az's "expiresOn": "2026-11-30 01:23:45.000000" in the machine's local time zone (whole
// seconds; the fraction is always zero in practice).
std::optional<system_clock::time_point> parse_local_time(std::string_view text) {
  std::size_t at = 0;
  std::tm fields{};
  auto field = [&](std::size_t count, char after) -> std::optional<int> {
    auto v = base::read_digits(text, at, count);
    if (!v) return std::nullopt;
    if (after != '\0') {
      if (at >= text.size() || text[at] != after) return std::nullopt;
      ++at;
    }
    return v;
  };
  auto year = field(4, '-'), month = field(2, '-'), day = field(2, ' '), hour = field(2, ':'),
       minute = field(2, ':'), second = field(2, '\0');
  if (!year || !month || !day || !hour || !minute || !second) return std::nullopt;
  if (at < text.size()) {
    if (text[at] != '.' || at + 1 == text.size()) return std::nullopt;
    for (++at; at < text.size(); ++at)
      if (text[at] < '0' || text[at] > '9') return std::nullopt;
  }
  const std::chrono::year_month_day date{std::chrono::year(*year), std::chrono::month(*month),
                                         std::chrono::day(*day)};
  if (!date.ok() || *hour > 23 || *minute > 59 || *second > 59) return std::nullopt;
  fields.tm_year = *year - 1900;
  fields.tm_mon = *month - 1;
  fields.tm_mday = *day;
  fields.tm_hour = *hour;
  fields.tm_min = *minute;
  fields.tm_sec = *second;
  fields.tm_isdst = -1;  // let the zone rules say whether DST applied then
  const std::time_t t = std::mktime(&fields);
  if (t == static_cast<std::time_t>(-1)) return std::nullopt;
  return system_clock::from_time_t(t);
}

// `az account get-access-token`: "expires_on" (epoch seconds) when present, as "expiresOn" is
// local time and older az versions print only that.
system_clock::time_point az_expiry(const secret_json& doc, system_clock::time_point now,
                                   std::chrono::seconds fallback) {
  if (const nlohmann::json* epoch = doc.find("expires_on"); epoch && !epoch->is_null()) {
    auto seconds = whole_seconds(*epoch);
    if (!seconds || *seconds < 0 ||
        *seconds > std::chrono::duration_cast<std::chrono::seconds>(
                       (now + max_lifetime).time_since_epoch())
                       .count())
      throw source_error(doc.message("\"expires_on\" is not a time in epoch seconds"));
    return system_clock::time_point(std::chrono::seconds(*seconds));
  }
  if (auto local = doc.text("expiresOn")) {
    auto expires = parse_local_time(*local);
    if (!expires) throw source_error(doc.message("\"expiresOn\" is not a local date-time"));
    return *expires;
  }
  return now + fallback;
}

base::secret required_token(secret_json& doc, std::string_view key) {
  auto token = doc.take_secret(key);
  if (!token || token->empty())
    throw source_error(doc.message("\"" + std::string(key) + "\" is missing"));
  return std::move(*token);
}

}  // namespace

service_account parse_service_account(std::string_view json) {
  secret_json doc(json, "service account key");
  auto required_text = [&](std::string_view key) {
    auto value = doc.text(key);
    if (!value || value->empty())
      throw source_error(doc.message("\"" + std::string(key) + "\" is missing"));
    return std::move(*value);
  };
  if (required_text("type") != "service_account")
    throw source_error(doc.message("\"type\" is not \"service_account\""));
  service_account account;
  account.client_email = required_text("client_email");
  account.private_key_pem = required_token(doc, "private_key");
  account.private_key_id = doc.text("private_key_id").value_or("");
  account.token_uri = doc.text("token_uri").value_or("");
  if (account.token_uri.empty()) account.token_uri = google_token_uri;
  return account;
}

std::string jwt_bearer_assertion(const service_account& account, std::string_view scope,
                                 system_clock::time_point now) {
  nlohmann::ordered_json header = {{"alg", "RS256"}, {"typ", "JWT"}};
  if (!account.private_key_id.empty()) header["kid"] = account.private_key_id;
  const auto issued = std::chrono::floor<std::chrono::seconds>(now.time_since_epoch()).count();
  const nlohmann::ordered_json claims = {{"iss", account.client_email},
                                         {"scope", scope},
                                         {"aud", account.token_uri},
                                         {"iat", issued},
                                         {"exp", issued + assertion_lifetime.count()}};
  return rs256_jws(account.private_key_pem.expose(), header, claims,
                   "service account " + account.client_email);
}

std::string downscope_form(std::string_view subject_token, std::string_view boundary) {
  return "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Atoken-exchange"
         "&subject_token_type=urn%3Aietf%3Aparams%3Aoauth%3Atoken-type%3Aaccess_token"
         "&requested_token_type=urn%3Aietf%3Aparams%3Aoauth%3Atoken-type%3Aaccess_token"
         "&subject_token=" +
         base::percent_encode(subject_token) + "&options=" + base::percent_encode(boundary);
}

std::string jwt_bearer_form(std::string_view assertion) {
  // Assertions are base64url and dots, all unreserved; anything else is escaped all the same.
  return "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=" +
         base::percent_encode(assertion);
}

access_token parse_oauth_token_response(std::string_view json, system_clock::time_point now) {
  secret_json doc(json, "token response");
  throw_if_oauth_error(doc);
  access_token result;
  result.token = required_token(doc, "access_token");
  result.expires = expires_in(doc, now, default_oauth_lifetime);
  return result;
}

access_token parse_token_command_output(std::string_view text, system_clock::time_point now,
                                        std::chrono::seconds default_lifetime) {
  const std::string_view output = base::trim(text);
  if (output.empty()) throw source_error("token command output: empty");
  access_token result;
  if (output.front() == '{') {
    secret_json doc(output, "token command output");
    throw_if_oauth_error(doc);
    if (doc.find("accessToken") != nullptr) {
      result.token = required_token(doc, "accessToken");
      result.expires = az_expiry(doc, now, default_lifetime);
    } else if (doc.find("access_token") != nullptr) {
      result.token = required_token(doc, "access_token");
      result.expires = expires_in(doc, now, default_lifetime);
    } else {
      throw source_error(doc.message("no \"accessToken\" or \"access_token\""));
    }
    return result;
  }
  // A bare token: one word of visible ASCII, nothing else (a warning printed to stdout would
  // otherwise be sent as part of the token).
  for (char c : output)
    if (c <= 0x20 || c >= 0x7f)
      throw source_error("token command output: neither JSON nor a single token on one line");
  result.token = base::secret(std::string(output));
  result.expires = now + default_lifetime;
  return result;
}

}  // namespace broker::brokers
