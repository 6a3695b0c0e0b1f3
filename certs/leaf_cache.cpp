#include "certs/leaf_cache.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <array>

#include <openssl/x509v3.h>

#include "certs/openssl_util.hpp"

namespace broker::certs {

namespace {

constexpr int leaf_valid_days = 30;

struct general_names_deleter {
  void operator()(GENERAL_NAMES* p) const { GENERAL_NAMES_free(p); }
};

// IP literals get an iPAddress SAN: clients match an IP host only against those (RFC 6125 §3.1.3.2
// forbids matching it against a DNS name), and DNS:1.2.3.4 would be rejected outright.
void add_subject_alt_name(X509* cert, const std::string& host) {
  std::array<unsigned char, 16> address{};
  int address_size = 0;
  if (inet_pton(AF_INET, host.c_str(), address.data()) == 1)
    address_size = 4;
  else if (inet_pton(AF_INET6, host.c_str(), address.data()) == 1)
    address_size = 16;
  const bool is_ip = address_size != 0;

  std::unique_ptr<GENERAL_NAMES, general_names_deleter> names(GENERAL_NAMES_new());
  GENERAL_NAME* name = GENERAL_NAME_new();
  ASN1_STRING* value = is_ip ? ASN1_OCTET_STRING_new() : ASN1_IA5STRING_new();
  const bool filled = is_ip
                          ? ASN1_STRING_set(value, address.data(), address_size) == 1
                          : ASN1_STRING_set(value, host.data(), static_cast<int>(host.size())) == 1;
  if (!names || name == nullptr || value == nullptr || !filled) {
    ASN1_STRING_free(value);
    GENERAL_NAME_free(name);
    throw_openssl("cannot build the subjectAltName for " + host);
  }
  GENERAL_NAME_set0_value(name, is_ip ? GEN_IPADD : GEN_DNS, value);
  if (sk_GENERAL_NAME_push(names.get(), name) == 0) {
    GENERAL_NAME_free(name);
    throw_openssl("cannot build the subjectAltName for " + host);
  }
  if (X509_add1_ext_i2d(cert, NID_subject_alt_name, names.get(), 0, X509V3_ADD_DEFAULT) != 1)
    throw_openssl("cannot add the subjectAltName for " + host);
}

// Now + 30 days, but never past the CA: a leaf outliving its issuer fails validation anyway.
void set_not_after(X509* cert, X509* ca) {
  ASN1_TIME* not_after = X509_getm_notAfter(cert);
  if (X509_time_adj_ex(not_after, leaf_valid_days, 0, nullptr) == nullptr)
    throw_openssl("cannot set the leaf notAfter");
  const ASN1_TIME* ca_not_after = X509_get0_notAfter(ca);
  if (ASN1_TIME_compare(not_after, ca_not_after) > 0 && X509_set1_notAfter(cert, ca_not_after) != 1)
    throw_openssl("cannot set the leaf notAfter");
}

}  // namespace

leaf_cache::leaf_cache(const certificate_authority& ca, std::size_t capacity)
    : ca_(ca), key_(generate_ec_key()), capacity_(std::max<std::size_t>(capacity, 1)) {}

std::shared_ptr<X509> leaf_cache::get(std::string_view host) {
  const std::string name(host);
  {
    std::lock_guard lock(mutex_);
    if (auto it = entries_.find(name); it != entries_.end()) {
      order_.splice(order_.begin(), order_, it->second.position);
      return it->second.cert;
    }
  }
  // Minting signs, so it runs unlocked: a new host must not stall lookups of the cached ones.
  auto leaf = mint(name);
  std::lock_guard lock(mutex_);
  ++minted_;
  if (auto it = entries_.find(name); it != entries_.end()) {
    // Another thread minted this host meanwhile: hand out its leaf so every caller shares one.
    order_.splice(order_.begin(), order_, it->second.position);
    return it->second.cert;
  }
  order_.push_front(name);
  entries_.emplace(name, entry{leaf, order_.begin()});
  if (entries_.size() > capacity_) {
    // Connections still holding the evicted leaf keep it alive through their shared_ptr.
    entries_.erase(order_.back());
    order_.pop_back();
  }
  return leaf;
}

std::size_t leaf_cache::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

std::size_t leaf_cache::minted() const {
  std::lock_guard lock(mutex_);
  return minted_;
}

std::shared_ptr<X509> leaf_cache::mint(const std::string& host) const {
  if (host.empty()) throw ca_error("cannot mint a leaf certificate for an empty host name");
  x509_ptr cert(X509_new());
  if (!cert) throw_openssl("cannot allocate a leaf certificate for " + host);
  X509* c = cert.get();
  X509* ca = ca_.certificate();
  if (X509_set_version(c, X509_VERSION_3) != 1) throw_openssl("cannot set the leaf version");
  set_random_serial(c);

  // MBSTRING_ASC accepts any bytes, so a cut through a multi-byte sequence cannot fail the mint.
  const std::string cn = host.substr(0, max_common_name);
  const auto* cn_bytes = reinterpret_cast<const unsigned char*>(cn.data());
  if (X509_NAME_add_entry_by_txt(X509_get_subject_name(c), "CN", MBSTRING_ASC, cn_bytes,
                                 static_cast<int>(cn.size()), -1, 0) != 1)
    throw_openssl("cannot set the leaf subject for " + host);
  if (X509_set_issuer_name(c, X509_get_subject_name(ca)) != 1)
    throw_openssl("cannot set the leaf issuer");

  set_not_before_yesterday(c);
  set_not_after(c, ca);
  if (X509_set_pubkey(c, key_.get()) != 1) throw_openssl("cannot set the leaf public key");

  add_subject_alt_name(c, host);
  add_extension(c, ca, NID_basic_constraints, "critical,CA:FALSE");
  add_extension(c, ca, NID_key_usage, "critical,digitalSignature");
  add_extension(c, ca, NID_ext_key_usage, "serverAuth");
  add_extension(c, ca, NID_authority_key_identifier, "keyid:always");
  if (X509_sign(c, ca_.key(), EVP_sha256()) <= 0)
    throw_openssl("cannot sign the leaf certificate for " + host);
  return std::shared_ptr<X509>(cert.release(), x509_deleter{});
}

}  // namespace broker::certs
