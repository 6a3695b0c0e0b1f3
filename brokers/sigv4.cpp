// AWS Signature Version 4: parsing the Authorization header and presigned query, building the
// canonical request and string to sign, deriving keys (aws-chunked bodies: sigv4_chunked.cpp).
// Canonicalization follows what AWS verifies and botocore signs (the AWS SigV4 test suite is the
// reference): a client's signature must verify here exactly as it would at AWS.
#include "brokers/sigv4.hpp"
#include "base/digest.hpp"
#include "base/text.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <new>
#include <utility>

namespace broker::brokers::sigv4 {
namespace {

using digest = std::array<unsigned char, 32>;

// Zeroes a buffer when it goes out of scope, also when a step of a key derivation throws.
class wipe_on_exit {
 public:
  wipe_on_exit(void* p, std::size_t n) : p_(p), n_(n) {}
  ~wipe_on_exit() { OPENSSL_cleanse(p_, n_); }
  wipe_on_exit(const wipe_on_exit&) = delete;
  wipe_on_exit& operator=(const wipe_on_exit&) = delete;

 private:
  void* p_;
  std::size_t n_;
};

void hmac_sha256(const unsigned char* key, std::size_t key_len, std::string_view data,
                 digest& out) {
  unsigned int len = 0;
  const auto* bytes = reinterpret_cast<const unsigned char*>(data.data());
  if (HMAC(EVP_sha256(), key, static_cast<int>(key_len), bytes, data.size(), out.data(), &len) ==
          nullptr ||
      len != out.size())
    throw std::runtime_error("HMAC-SHA256 failed");
}

bool is_digits(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  for (;;) {
    std::size_t at = s.find(sep);
    parts.push_back(s.substr(0, at));
    if (at == std::string_view::npos) return parts;
    s.remove_prefix(at + 1);
  }
}

struct split_target {
  std::string_view path;
  std::string_view query;  // without the '?'
};

// Origin-form "/p?q", or absolute-form "https://host/p?q" as a plaintext proxy may receive it.
split_target split_request_target(std::string_view target) {
  if (!target.starts_with('/')) {
    if (std::size_t scheme = target.find("://"); scheme != std::string_view::npos) {
      target.remove_prefix(scheme + 3);
      std::size_t end = target.find_first_of("/?");
      target.remove_prefix(end == std::string_view::npos ? target.size() : end);
    }
  }
  std::size_t q = target.find('?');
  if (q == std::string_view::npos) return {target, {}};
  return {target.substr(0, q), target.substr(q + 1)};
}

// Query parameters split at the first '=', percent-decoded. Empty pieces ("a=1&&b=2") are no
// parameters.
std::vector<std::pair<std::string, std::string>> decode_query(std::string_view query) {
  std::vector<std::pair<std::string, std::string>> params;
  if (query.empty()) return params;
  for (std::string_view piece : split(query, '&')) {
    if (piece.empty()) continue;
    std::size_t eq = piece.find('=');
    std::string_view name = piece.substr(0, eq);
    std::string_view value = eq == std::string_view::npos ? "" : piece.substr(eq + 1);
    params.emplace_back(base::percent_decode(name), base::percent_decode(value));
  }
  return params;
}

// Removes "." and ".." segments and empty segments (runs of '/'), keeping a leading and a
// trailing '/', the way AWS normalizes before it signs.
std::string normalize_path(std::string_view path) {
  std::vector<std::string_view> kept;
  for (std::string_view segment : split(path, '/')) {
    if (segment.empty() || segment == ".") continue;
    if (segment == "..") {
      if (!kept.empty()) kept.pop_back();
    } else {
      kept.push_back(segment);
    }
  }
  std::string out = "/";
  for (std::size_t i = 0; i < kept.size(); ++i) {
    if (i > 0) out.push_back('/');
    out.append(kept[i]);
  }
  if (!kept.empty() && path.ends_with('/')) out.push_back('/');
  return out;
}

std::string canonical_uri(std::string_view path, std::string_view service) {
  if (path.empty()) return "/";
  if (service == "s3") return std::string(path);
  return base::percent_encode(normalize_path(path), true);
}

std::string canonical_query(std::string_view query, bool presigned) {
  std::vector<std::pair<std::string, std::string>> encoded;
  for (auto& [name, value] : decode_query(query)) {
    if (presigned && name == "X-Amz-Signature") continue;
    encoded.emplace_back(base::percent_encode(name), base::percent_encode(value));
  }
  std::sort(encoded.begin(), encoded.end());
  std::string out;
  for (const auto& [name, value] : encoded) {
    if (!out.empty()) out.push_back('&');
    out += name + "=" + value;
  }
  return out;
}

// Trimmed, with every inner run of whitespace made one space.
std::string canonical_value(std::string_view value) {
  std::string out;
  bool gap = false;
  for (char c : base::trim(value)) {
    if (base::is_space(c)) {
      gap = true;
      continue;
    }
    if (gap) out.push_back(' ');
    gap = false;
    out.push_back(c);
  }
  return out;
}

std::string canonical_header(std::string_view name,
                             const std::vector<http::header_field>& headers) {
  std::string joined;
  bool found = false;
  for (const http::header_field& h : headers) {
    if (!http::iequals(h.name, name)) continue;
    if (found) joined.push_back(',');
    joined += canonical_value(h.value);
    found = true;
  }
  if (!found) throw sigv4_error("signed header is absent: " + std::string(name));
  return joined;
}

// RFC 9110 token characters, lower-case only, as SignedHeaders must be.
bool is_header_name(std::string_view name) {
  static constexpr std::string_view symbols = "!#$%&'*+-.^_`|~";
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           symbols.find(c) != std::string_view::npos;
  });
}

// "a;b;c": lower-case names, strictly ascending (so no duplicates).
std::optional<std::vector<std::string>> parse_signed_headers(std::string_view text) {
  std::vector<std::string> names;
  for (std::string_view name : split(text, ';')) {
    if (!is_header_name(name)) return std::nullopt;
    if (!names.empty() && !(names.back() < name)) return std::nullopt;
    names.emplace_back(name);
  }
  return names;
}

std::string join(const std::vector<std::string>& names, char sep) {
  std::string out;
  for (const std::string& n : names) {
    if (!out.empty()) out.push_back(sep);
    out += n;
  }
  return out;
}

// YYYYMMDDTHHMMSSZ
}  // namespace

bool is_amz_date(std::string_view s) {
  return s.size() == 16 && is_digits(s.substr(0, 8)) && s[8] == 'T' && is_digits(s.substr(9, 6)) &&
         s[15] == 'Z';
}

std::string credential_scope::text() const {
  return date + "/" + region + "/" + service + "/aws4_request";
}

std::optional<credential_field> parse_credential(std::string_view text) {
  std::vector<std::string_view> parts = split(text, '/');
  if (parts.size() != 5 || parts[4] != "aws4_request") return std::nullopt;
  if (parts[1].size() != 8 || !is_digits(parts[1])) return std::nullopt;
  if (parts[0].empty() || parts[2].empty() || parts[3].empty()) return std::nullopt;
  return credential_field{std::string(parts[0]),
                          {std::string(parts[1]), std::string(parts[2]), std::string(parts[3])}};
}

std::optional<authorization> parse_authorization(std::string_view value) {
  value = base::trim(value);
  if (!value.starts_with(algorithm)) return std::nullopt;
  value.remove_prefix(algorithm.size());
  if (value.empty() || !base::is_space(value.front())) return std::nullopt;

  std::optional<credential_field> credential;
  std::optional<std::vector<std::string>> signed_headers;
  std::optional<std::string> signature;
  for (std::string_view component : split(value, ',')) {
    component = base::trim(component);
    std::size_t eq = component.find('=');
    if (eq == std::string_view::npos) return std::nullopt;
    std::string_view name = component.substr(0, eq);
    std::string_view text = component.substr(eq + 1);
    // A repeated component is ambiguous: which one would AWS check?
    if (name == "Credential" && !credential) {
      credential = parse_credential(text);
      if (!credential) return std::nullopt;
    } else if (name == "SignedHeaders" && !signed_headers) {
      signed_headers = parse_signed_headers(text);
      if (!signed_headers) return std::nullopt;
    } else if (name == "Signature" && !signature) {
      if (!base::is_signature(text)) return std::nullopt;
      signature = std::string(text);
    } else {
      return std::nullopt;
    }
  }
  if (!credential || !signed_headers || !signature) return std::nullopt;
  return authorization{std::move(*credential), std::move(*signed_headers), std::move(*signature)};
}

std::string format_authorization(const authorization& a) {
  return std::string(algorithm) + " Credential=" + a.credential.access_key_id + "/" +
         a.credential.scope.text() + ", SignedHeaders=" + join(a.signed_headers, ';') +
         ", Signature=" + a.signature;
}

std::optional<presigned_query> parse_presigned(std::string_view target) {
  std::vector<std::pair<std::string, std::string>> params =
      decode_query(split_request_target(target).query);
  auto find = [&](std::string_view name) -> const std::string* {
    const std::string* hit = nullptr;
    for (const auto& [n, v] : params) {
      if (n != name) continue;
      if (hit) throw sigv4_error("presigned query repeats " + std::string(name));
      hit = &v;
    }
    return hit;
  };
  auto require = [&](std::string_view name) -> const std::string& {
    const std::string* v = find(name);
    if (!v) throw sigv4_error("presigned query lacks " + std::string(name));
    return *v;
  };

  const std::string* algo = find("X-Amz-Algorithm");
  if (!algo) return std::nullopt;
  if (*algo != algorithm) throw sigv4_error("presigned query names another algorithm");
  presigned_query q;
  std::optional<credential_field> credential = parse_credential(require("X-Amz-Credential"));
  if (!credential) throw sigv4_error("presigned X-Amz-Credential is malformed");
  q.credential = std::move(*credential);
  q.amz_date = require("X-Amz-Date");
  if (!is_amz_date(q.amz_date)) throw sigv4_error("presigned X-Amz-Date is malformed");
  std::optional<std::vector<std::string>> names =
      parse_signed_headers(require("X-Amz-SignedHeaders"));
  if (!names) throw sigv4_error("presigned X-Amz-SignedHeaders is malformed");
  q.signed_headers = std::move(*names);
  q.signature = require("X-Amz-Signature");
  if (!base::is_signature(q.signature)) throw sigv4_error("presigned X-Amz-Signature is malformed");
  return q;
}

std::string canonical_request(std::string_view method, std::string_view target,
                              const std::vector<http::header_field>& headers,
                              const std::vector<std::string>& signed_headers,
                              std::string_view payload_hash, std::string_view service,
                              bool presigned) {
  split_target t = split_request_target(target);
  std::string out;
  out.append(method).append("\n");
  out.append(canonical_uri(t.path, service)).append("\n");
  out.append(canonical_query(t.query, presigned)).append("\n");
  for (const std::string& name : signed_headers)
    out.append(name).append(":").append(canonical_header(name, headers)).append("\n");
  out.append("\n");
  out.append(join(signed_headers, ';')).append("\n");
  out.append(payload_hash);
  return out;
}

std::string string_to_sign(std::string_view amz_date, const credential_scope& scope,
                           std::string_view canonical) {
  return std::string(algorithm) + "\n" + std::string(amz_date) + "\n" + scope.text() + "\n" +
         base::sha256_hex(canonical);
}

signing_key::signing_key(std::string_view secret_access_key, const credential_scope& scope) {
  // Every buffer that holds the secret or a key derived from it is wiped on the way out. The
  // reserve() keeps "AWS4" + secret in one allocation, so no stale copy is left behind.
  std::string seed;
  seed.reserve(4 + secret_access_key.size());
  wipe_on_exit wipe_seed(seed.data(), seed.capacity());
  seed.append("AWS4").append(secret_access_key);
  digest a{}, b{};
  wipe_on_exit wipe_a(a.data(), a.size()), wipe_b(b.data(), b.size());

  hmac_sha256(reinterpret_cast<const unsigned char*>(seed.data()), seed.size(), scope.date, a);
  hmac_sha256(a.data(), a.size(), scope.region, b);
  hmac_sha256(b.data(), b.size(), scope.service, a);
  hmac_sha256(a.data(), a.size(), "aws4_request", b);
  key_ = b;  // only a complete key lands in the object (a throwing constructor runs no destructor)
}

signing_key::~signing_key() {
  OPENSSL_cleanse(key_.data(), key_.size());
}

std::string signing_key::sign(std::string_view text) const {
  digest mac{};
  hmac_sha256(key_.data(), key_.size(), text, mac);
  return base::hex_encode(mac.data(), mac.size());
}

sha256_stream::sha256_stream() : ctx_(EVP_MD_CTX_new()) {
  if (ctx_ == nullptr) throw std::bad_alloc();
  if (EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), EVP_sha256(), nullptr) != 1) {
    EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_));
    throw std::runtime_error("EVP_DigestInit_ex(sha256) failed");
  }
}

sha256_stream::~sha256_stream() {
  EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_));
}

void sha256_stream::update(std::string_view data) {
  if (EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), data.data(), data.size()) != 1)
    throw std::runtime_error("EVP_DigestUpdate failed");
}

// Ends the stream; the object starts a new, empty one, so a stray update() cannot touch a
// finalized context.
std::string sha256_stream::hex_digest() {
  auto* ctx = static_cast<EVP_MD_CTX*>(ctx_);
  digest md{};
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(ctx, md.data(), &len) != 1 || len != md.size() ||
      EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("EVP_DigestFinal_ex(sha256) failed");
  return base::hex_encode(md.data(), md.size());
}

bool signatures_equal(std::string_view a, std::string_view b) {
  // The length of a signature is not secret; its bytes are compared without an early exit.
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace broker::brokers::sigv4
