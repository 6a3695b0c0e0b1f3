// Verify-and-re-sign for AWS SigV4 requests. The canonical request is built twice: once as the
// client sent it (checked with the dummy secret) and once with the real key id and session token
// in place (signed with the real secret). Everything else the client signed stays as it was.
#include "brokers/aws_signing.hpp"
#include "base/digest.hpp"
#include "base/text.hpp"

#include <algorithm>

#include "base/secret.hpp"
#include "brokers/families.hpp"

namespace broker::brokers {
namespace {

using sigv4::sigv4_error;

http::header_field* find_header(std::vector<http::header_field>& headers, std::string_view name) {
  for (auto& h : headers)
    if (http::iequals(h.name, name)) return &h;
  return nullptr;
}

const http::header_field* find_header(const std::vector<http::header_field>& headers,
                                      std::string_view name) {
  return find_header(const_cast<std::vector<http::header_field>&>(headers), name);
}

// Sets query parameter `name`'s value (already percent-encoded) in a target; the parameter must
// be there. Other parameters keep their bytes and order.
void set_query_value(std::string& target, std::string_view name, std::string_view encoded) {
  const std::size_t question = target.find('?');
  if (question == std::string::npos) throw sigv4_error("no query");
  std::size_t at = question + 1;
  while (at <= target.size()) {
    std::size_t end = target.find('&', at);
    if (end == std::string::npos) end = target.size();
    const std::string_view param = std::string_view(target).substr(at, end - at);
    const std::size_t eq = param.find('=');
    if (base::percent_decode(param.substr(0, eq)) == name) {
      const std::size_t value_at = eq == std::string_view::npos ? end : at + eq + 1;
      target.replace(value_at, end - value_at,
                     std::string(eq == std::string_view::npos ? "=" : "") + std::string(encoded));
      return;
    }
    at = end + 1;
  }
  throw sigv4_error(std::string("no ") + std::string(name) + " parameter");
}

std::string query_value(std::string_view target, std::string_view name) {
  const std::size_t question = target.find('?');
  return question == std::string_view::npos ? std::string()
                                            : base::form_value(target.substr(question + 1), name);
}

std::string amz_date_of(const std::vector<http::header_field>& headers) {
  for (std::string_view name : {"x-amz-date", "date"}) {
    if (const auto* h = find_header(headers, name); h && sigv4::is_amz_date(h->value))
      return h->value;
  }
  throw sigv4_error("the request has no X-Amz-Date in the form YYYYMMDDTHHMMSSZ");
}

constexpr std::string_view signature_v2 =
    "the request is signed with AWS Signature Version 2, which the broker does not re-sign; sign "
    "with Signature Version 4 (boto3/botocore: Config(signature_version=\"s3v4\"); AWS CLI: "
    "aws configure set default.s3.signature_version s3v4)";

bool is_listed(const std::vector<std::string>& list, std::string_view value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

}  // namespace

aws_signed_request::aws_signed_request(const aws_identity& id, bool presigned,
                                       sigv4::credential_scope scope)
    : id_(id), presigned_(presigned), scope_(std::move(scope)) {}

aws_signed_request::~aws_signed_request() {
  base::wipe(real_signature_);
}

std::unique_ptr<aws_signed_request> find_aws_request(const std::vector<const aws_identity*>& ids,
                                                     std::string_view target,
                                                     const std::vector<http::header_field>& headers,
                                                     bool has_body) {
  auto identity_of = [&](std::string_view key_id) -> const aws_identity* {
    for (const aws_identity* id : ids)
      if (key_id == id->dummy_key_id) return id;
    return nullptr;
  };
  for (const auto& h : headers) {
    if (!http::iequals(h.name, "authorization")) continue;
    auto auth = sigv4::parse_authorization(h.value);
    if (!auth) {
      // Ours only if it names a dummy key id; another scheme or someone else's key passes.
      for (const aws_identity* id : ids) {
        if (h.value.find(id->dummy_key_id) == std::string::npos) continue;
        if (h.value.starts_with("AWS ")) throw sigv4_error(std::string(signature_v2));
        if (h.value.starts_with("AWS4-ECDSA-P256-SHA256"))
          throw sigv4_error(
              "the request is signed with SigV4a (AWS4-ECDSA-P256-SHA256), which the broker does "
              "not re-sign; use a regional endpoint with SigV4");
        throw sigv4_error("the Authorization header is not a well-formed AWS4-HMAC-SHA256 value");
      }
      continue;
    }
    const aws_identity* id = identity_of(auth->credential.access_key_id);
    if (!id) continue;
    auto request = std::make_unique<aws_signed_request>(*id, false, auth->credential.scope);
    const auto* hash = find_header(headers, "x-amz-content-sha256");
    request->take_payload_hash(hash ? std::optional<std::string>(hash->value) : std::nullopt,
                               has_body);
    return request;
  }

  std::optional<sigv4::presigned_query> presigned;
  try {
    presigned = sigv4::parse_presigned(target);
  } catch (const sigv4_error&) {
    // A malformed presigned URL is only ours to refuse when it names a dummy key id.
    for (const aws_identity* id : ids)
      if (target.find(id->dummy_key_id) != std::string_view::npos) throw;
    return nullptr;
  }
  if (!presigned) {
    // A Signature Version 2 presigned URL (botocore's default for S3 before 1.36).
    if (const std::string key_id = query_value(target, "AWSAccessKeyId"); identity_of(key_id))
      throw sigv4_error(std::string(signature_v2));
    return nullptr;
  }
  const aws_identity* id = identity_of(presigned->credential.access_key_id);
  if (!id) return nullptr;
  auto request = std::make_unique<aws_signed_request>(*id, true, presigned->credential.scope);
  // S3 presigned URLs never sign the body.
  request->take_payload_hash(request->scope_.service == "s3"
                                 ? std::optional<std::string>(sigv4::unsigned_payload)
                                 : std::nullopt,
                             has_body);
  return request;
}

void aws_signed_request::take_payload_hash(std::optional<std::string> stated, bool has_body) {
  if (stated) {
    // A digest the client states is checked against what it sends.
    needs_body_ = has_body && base::is_lower_hex(*stated, 64);
    payload_hash_ = std::move(*stated);
  } else if (has_body) {
    needs_body_ = hash_from_body_ = true;
  } else {
    payload_hash_ = sigv4::empty_sha256;
  }
  // STS actions are read from the body too (action_refusal); its bodies are a few bytes.
  if (scope_.service == "sts" && has_body) needs_body_ = true;
}

std::string aws_signed_request::action_refusal(std::string_view target,
                                               std::string_view body) const {
  if (scope_.service != "sts") return {};
  // The query protocol: Action in the query, or in a form body.
  std::string action = query_value(target, "Action");
  if (action.empty()) action = base::form_value(body, "Action");
  static constexpr std::string_view vending[] = {
      "GetSessionToken",    "GetFederationToken",        "AssumeRole",
      "AssumeRoleWithSAML", "AssumeRoleWithWebIdentity", "AssumeRoot"};
  for (std::string_view a : vending)
    if (action == a)
      return "sts:" + action +
             " would hand the session new real credentials, which only the broker may hold";
  return {};
}

std::string aws_scope_refusal(const aws_identity& id, const sigv4::credential_scope& scope) {
  if (!id.regions->empty() && !is_listed(*id.regions, scope.region))
    return "region " + scope.region + " is not in the credential's regions";
  if (!id.services->empty() && !is_listed(*id.services, scope.service))
    return "service " + scope.service + " is not in the credential's services";
  return {};
}

void aws_signed_request::resign(std::string_view method, std::string& target,
                                std::vector<http::header_field>& headers, std::string_view body) {
  if (hash_from_body_) {
    payload_hash_ = base::sha256_hex(body);
  } else if (needs_body_ && base::is_lower_hex(payload_hash_, 64) &&
             base::sha256_hex(body) != payload_hash_) {
    throw sigv4_error("the body does not match its x-amz-content-sha256");
  }
  auto signed_headers = check_as_sent(method, target, headers);
  // The same request with the real key id and session token, signed with the real secret.
  const aws_values real = id_.real();
  real_key_ = std::make_unique<sigv4::signing_key>(real.secret_key, scope_);
  if (presigned_)
    sign_query(method, target, headers, signed_headers, real);
  else
    sign_headers(method, target, headers, std::move(signed_headers), real);
}

std::vector<std::string> aws_signed_request::check_as_sent(
    std::string_view method, const std::string& target,
    const std::vector<http::header_field>& headers) {
  std::vector<std::string> signed_headers;
  std::string signature;
  if (presigned_) {
    auto p = sigv4::parse_presigned(target);
    signed_headers = std::move(p->signed_headers);
    signature = std::move(p->signature);
    amz_date_ = std::move(p->amz_date);
  } else {
    auto auth = sigv4::parse_authorization(find_header(headers, "authorization")->value);
    signed_headers = std::move(auth->signed_headers);
    signature = std::move(auth->signature);
    amz_date_ = amz_date_of(headers);
  }
  if (amz_date_.compare(0, 8, scope_.date) != 0)
    throw sigv4_error("the credential scope's date is not the request's date");
  dummy_key_ = std::make_unique<sigv4::signing_key>(id_.dummy_secret, scope_);
  const std::string as_sent = sigv4::canonical_request(method, target, headers, signed_headers,
                                                       payload_hash_, scope_.service, presigned_);
  if (!sigv4::signatures_equal(dummy_key_->sign(sigv4::string_to_sign(amz_date_, scope_, as_sent)),
                               signature))
    throw sigv4_error(
        "the signature does not match the request (it was altered, or not signed "
        "with this session's credentials)");
  dummy_signature_ = std::move(signature);
  return signed_headers;
}

void aws_signed_request::sign_query(std::string_view method, std::string& target,
                                    const std::vector<http::header_field>& headers,
                                    const std::vector<std::string>& signed_headers,
                                    const aws_values& real) {
  set_query_value(target, "X-Amz-Credential",
                  base::percent_encode(std::string(real.key_id) + "/" + scope_.text()));
  const std::string sent_token = query_value(target, "X-Amz-Security-Token");
  if (!sent_token.empty() && sent_token == id_.dummy_token)
    set_query_value(target, "X-Amz-Security-Token", base::percent_encode(real.token));
  else if (sent_token.empty() && !real.token.empty() && id_.dummy_token.empty())
    // Temporary credentials the child was given no token for (they were long-term at first).
    target += (target.find('?') == std::string::npos ? "?" : "&") +
              std::string("X-Amz-Security-Token=") + base::percent_encode(real.token);
  const std::string canonical = sigv4::canonical_request(method, target, headers, signed_headers,
                                                         payload_hash_, scope_.service, true);
  real_signature_ = real_key_->sign(sigv4::string_to_sign(amz_date_, scope_, canonical));
  set_query_value(target, "X-Amz-Signature", real_signature_);
}

void aws_signed_request::sign_headers(std::string_view method, const std::string& target,
                                      std::vector<http::header_field>& headers,
                                      std::vector<std::string> signed_headers,
                                      const aws_values& real) {
  if (auto* token = find_header(headers, "x-amz-security-token")) {
    if (!id_.dummy_token.empty() && token->value == id_.dummy_token) token->value = real.token;
  } else if (!real.token.empty() && id_.dummy_token.empty()) {
    // Temporary credentials the child was given no token for: the token goes along, signed.
    headers.push_back({"X-Amz-Security-Token", std::string(real.token)});
    signed_headers.push_back("x-amz-security-token");
    std::sort(signed_headers.begin(), signed_headers.end());
  }
  const std::string canonical = sigv4::canonical_request(method, target, headers, signed_headers,
                                                         payload_hash_, scope_.service, false);
  real_signature_ = real_key_->sign(sigv4::string_to_sign(amz_date_, scope_, canonical));
  sigv4::authorization out{
      {std::string(real.key_id), scope_}, std::move(signed_headers), real_signature_};
  find_header(headers, "authorization")->value = sigv4::format_authorization(out);
}

std::unique_ptr<sigv4::chunk_resigner> aws_signed_request::body_resigner() const {
  const bool signed_trailer = payload_hash_ == sigv4::streaming_signed_trailer;
  if (presigned_ || (payload_hash_ != sigv4::streaming_signed && !signed_trailer)) return nullptr;
  sigv4::chunk_resigner::keys keys{dummy_key_.get(), real_key_.get(), amz_date_,     scope_,
                                   dummy_signature_, real_signature_, signed_trailer};
  return std::make_unique<sigv4::chunk_resigner>(std::move(keys));
}

}  // namespace broker::brokers
