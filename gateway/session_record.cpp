#include "gateway/session_record.hpp"

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include <stdexcept>

#include "base/digest.hpp"
#include "base/text.hpp"
#include "brokers/families.hpp"
#include "http/message.hpp"
#include "session/audit_log.hpp"

namespace broker::gateway {
namespace {

std::string random_bytes(std::size_t n) {
  std::string out(n, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(n)) != 1)
    throw std::runtime_error("RAND_bytes failed");
  return out;
}

template <class T>
T field(const nlohmann::json& j, const char* name) {
  if (!j.contains(name))
    throw std::invalid_argument(std::string("session record: no \"") + name + "\"");
  try {
    return j.at(name).get<T>();
  } catch (const nlohmann::json::exception&) {
    throw std::invalid_argument(std::string("session record: \"") + name + "\" has the wrong type");
  }
}

}  // namespace

nlohmann::ordered_json to_json(const session_record& r) {
  auto labels = nlohmann::ordered_json::object();
  for (const auto& [k, v] : r.labels) labels[k] = v;
  auto policies = nlohmann::ordered_json::array();
  for (const auto& p : r.policies) policies.push_back({{"source", p.source}, {"text", p.text}});
  return {{"id", r.id},
          {"token_sha256", r.token_sha256},
          {"created_ms", r.created_ms},
          {"expires_ms", r.expires_ms},
          {"user", r.user},
          {"labels", labels},
          {"policies", policies},
          {"dummy_seed", r.dummy_seed},
          {"revoked", r.revoked}};
}

session_record record_from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw std::invalid_argument("session record: not a JSON object");
  session_record r;
  r.id = field<std::string>(j, "id");
  r.token_sha256 = field<std::string>(j, "token_sha256");
  r.created_ms = field<std::int64_t>(j, "created_ms");
  r.expires_ms = field<std::int64_t>(j, "expires_ms");
  r.user = field<std::string>(j, "user");
  const auto labels = field<nlohmann::json>(j, "labels");
  if (!labels.is_object())
    throw std::invalid_argument("session record: \"labels\" is not an object");
  for (const auto& [k, v] : labels.items()) {
    if (!v.is_string())
      throw std::invalid_argument("session record: label " + k + " is not a string");
    r.labels.emplace_back(k, v.get<std::string>());
  }
  const auto policies = field<nlohmann::json>(j, "policies");
  if (!policies.is_array())
    throw std::invalid_argument("session record: \"policies\" is not a list");
  for (const auto& p : policies)
    r.policies.push_back({field<std::string>(p, "source"), field<std::string>(p, "text")});
  r.dummy_seed = field<std::string>(j, "dummy_seed");
  r.revoked = field<bool>(j, "revoked");
  return r;
}

nlohmann::ordered_json public_view(const session_record& r, std::int64_t now_ms) {
  auto labels = nlohmann::ordered_json::object();
  for (const auto& [k, v] : r.labels) labels[k] = v;
  auto sources = nlohmann::ordered_json::array();
  for (const auto& p : r.policies) sources.push_back(p.source);
  const char* state = r.revoked                                  ? "revoked"
                      : (r.expires_ms && now_ms >= r.expires_ms) ? "expired"
                                                                 : "active";
  return {{"id", r.id},
          {"state", state},
          {"user", r.user},
          {"labels", labels},
          {"created_ms", r.created_ms},
          {"expires_ms", r.expires_ms},
          {"policies", sources}};
}

std::string new_gateway_session_id() {
  const auto bytes = random_bytes(6);
  return "g-" +
         base::hex_encode(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
}

base::secret new_proxy_token() {
  auto bytes = random_bytes(32);
  // base64url without padding: the token sits in a URL's userinfo unescaped.
  std::string text = base::base64_encode(bytes, base::base64_alphabet::url, false);
  OPENSSL_cleanse(bytes.data(), bytes.size());
  return base::secret(std::move(text));
}

std::string new_dummy_seed() {
  const auto bytes = random_bytes(32);
  return base::hex_encode(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
}

std::string token_sha256(const base::secret& token) {
  return base::sha256_hex(token.expose());
}

std::optional<proxy_credential> parse_proxy_authorization(std::string_view value) {
  const auto auth = brokers::parse_auth_value(value);
  if (!auth || !http::iequals(auth->scheme, "basic")) return std::nullopt;
  auto decoded = base::base64_decode(auth->token);
  if (!decoded) return std::nullopt;
  base::secret whole(std::move(*decoded));
  const auto text = whole.expose();
  const auto colon = text.find(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == text.size())
    return std::nullopt;
  return proxy_credential{std::string(text.substr(0, colon)),
                          base::secret(std::string(text.substr(colon + 1)))};
}

bool token_matches(const session_record& r, const base::secret& token) {
  const std::string given = token_sha256(token);
  return given.size() == r.token_sha256.size() &&
         CRYPTO_memcmp(given.data(), r.token_sha256.data(), given.size()) == 0;
}

}  // namespace broker::gateway
