#include <catch2/catch.hpp>

#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <openssl/x509v3.h>

#include "certs/ca.hpp"
#include "certs/leaf_cache.hpp"

using broker::certs::ca_error;
using broker::certs::certificate_authority;
using broker::certs::leaf_cache;

namespace {

// X509_verify_cert against a store holding only `ca`, as a TLS client checking a server would;
// X509_V_OK on success, else the verification error.
int verify(X509* leaf, X509* ca, const std::function<int(X509_VERIFY_PARAM*)>& expect) {
  X509_STORE* store = X509_STORE_new();
  X509_STORE_CTX* ctx = X509_STORE_CTX_new();
  REQUIRE(store != nullptr);
  REQUIRE(ctx != nullptr);
  REQUIRE(X509_STORE_add_cert(store, ca) == 1);
  REQUIRE(X509_STORE_CTX_init(ctx, store, leaf, nullptr) == 1);
  REQUIRE(X509_STORE_CTX_set_purpose(ctx, X509_PURPOSE_SSL_SERVER) == 1);
  REQUIRE(expect(X509_STORE_CTX_get0_param(ctx)) == 1);
  const int ok = X509_verify_cert(ctx);
  const int error = ok == 1 ? X509_V_OK : X509_STORE_CTX_get_error(ctx);
  X509_STORE_CTX_free(ctx);
  X509_STORE_free(store);
  return error;
}

int verify_host(X509* leaf, X509* ca, const char* host) {
  return verify(leaf, ca,
                [host](X509_VERIFY_PARAM* p) { return X509_VERIFY_PARAM_set1_host(p, host, 0); });
}

int verify_ip(X509* leaf, X509* ca, const char* ip) {
  return verify(leaf, ca,
                [ip](X509_VERIFY_PARAM* p) { return X509_VERIFY_PARAM_set1_ip_asc(p, ip); });
}

// No Catch assertions inside: the concurrency tests call it from worker threads.
std::string common_name(X509* cert) {
  X509_NAME* name = X509_get_subject_name(cert);
  const int i = X509_NAME_get_index_by_NID(name, NID_commonName, -1);
  if (i < 0) return {};
  const ASN1_STRING* value = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, i));
  return std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(value)),
                     static_cast<std::size_t>(ASN1_STRING_length(value)));
}

}  // namespace

TEST_CASE("leaf for a DNS name verifies against the CA for that name only", "[certs][leaf]") {
  auto ca = certificate_authority::generate("leaf test CA");
  leaf_cache cache(ca);
  auto leaf = cache.get("api.example.com");
  REQUIRE(leaf);
  CHECK(verify_host(leaf.get(), ca.certificate(), "api.example.com") == X509_V_OK);
  CHECK(verify_host(leaf.get(), ca.certificate(), "other.example.com") ==
        X509_V_ERR_HOSTNAME_MISMATCH);
  CHECK(verify_host(leaf.get(), ca.certificate(), "example.com") == X509_V_ERR_HOSTNAME_MISMATCH);

  auto stranger = certificate_authority::generate("another CA");
  CHECK(verify_host(leaf.get(), stranger.certificate(), "api.example.com") != X509_V_OK);
}

TEST_CASE("leaf for IP literals carries an IP SAN", "[certs][leaf]") {
  auto ca = certificate_authority::generate("ip test CA");
  leaf_cache cache(ca);
  auto v4 = cache.get("127.0.0.1");
  CHECK(verify_ip(v4.get(), ca.certificate(), "127.0.0.1") == X509_V_OK);
  CHECK(verify_ip(v4.get(), ca.certificate(), "127.0.0.2") == X509_V_ERR_IP_ADDRESS_MISMATCH);

  auto v6 = cache.get("2001:db8::1");
  CHECK(verify_ip(v6.get(), ca.certificate(), "2001:db8::1") == X509_V_OK);
  CHECK(verify_ip(v6.get(), ca.certificate(), "2001:db8:0:0:0:0:0:1") == X509_V_OK);
  CHECK(verify_ip(v6.get(), ca.certificate(), "2001:db8::2") == X509_V_ERR_IP_ADDRESS_MISMATCH);
  auto loopback = cache.get("::1");
  CHECK(verify_ip(loopback.get(), ca.certificate(), "::1") == X509_V_OK);
  CHECK(verify_ip(loopback.get(), ca.certificate(), "127.0.0.1") == X509_V_ERR_IP_ADDRESS_MISMATCH);
}

TEST_CASE("leaf certifies the cache key and is a server certificate", "[certs][leaf]") {
  auto ca = certificate_authority::generate("props CA");
  leaf_cache cache(ca);
  auto leaf = cache.get("svc.internal");
  CHECK(EVP_PKEY_eq(X509_get0_pubkey(leaf.get()), cache.key()) == 1);
  CHECK(EVP_PKEY_get_base_id(cache.key()) == EVP_PKEY_EC);
  CHECK(X509_get_version(leaf.get()) == X509_VERSION_3);
  CHECK(X509_check_ca(leaf.get()) == 0);
  CHECK(X509_check_purpose(leaf.get(), X509_PURPOSE_SSL_SERVER, 0) == 1);
  CHECK((X509_get_extended_key_usage(leaf.get()) & XKU_SSL_SERVER) != 0);
  CHECK((X509_get_key_usage(leaf.get()) & KU_DIGITAL_SIGNATURE) != 0);
  CHECK(X509_get_signature_nid(leaf.get()) == NID_ecdsa_with_SHA256);
  CHECK(common_name(leaf.get()) == "svc.internal");
  CHECK(X509_NAME_cmp(X509_get_issuer_name(leaf.get()), X509_get_subject_name(ca.certificate())) ==
        0);
  REQUIRE(X509_get0_authority_key_id(leaf.get()) != nullptr);
  CHECK(ASN1_OCTET_STRING_cmp(X509_get0_authority_key_id(leaf.get()),
                              X509_get0_subject_key_id(ca.certificate())) == 0);

  int days = 0, secs = 0;
  REQUIRE(ASN1_TIME_diff(&days, &secs, nullptr, X509_get0_notBefore(leaf.get())) == 1);
  CHECK(days * 86400 + secs <= -86000);
  REQUIRE(ASN1_TIME_diff(&days, &secs, nullptr, X509_get0_notAfter(leaf.get())) == 1);
  CHECK((days == 29 || days == 30));
}

TEST_CASE("leaf never outlives its CA", "[certs][leaf]") {
  auto ca = certificate_authority::generate("short CA", 2);
  leaf_cache cache(ca);
  auto leaf = cache.get("short.example");
  CHECK(ASN1_TIME_compare(X509_get0_notAfter(leaf.get()), X509_get0_notAfter(ca.certificate())) ==
        0);
  CHECK(verify_host(leaf.get(), ca.certificate(), "short.example") == X509_V_OK);
}

TEST_CASE("leaf for a long host truncates the CN but keeps the full SAN", "[certs][leaf]") {
  auto ca = certificate_authority::generate("long CA");
  leaf_cache cache(ca);
  const std::string host = std::string(60, 'a') + "." + std::string(60, 'b') + ".example";
  auto leaf = cache.get(host);
  CHECK(common_name(leaf.get()) == host.substr(0, 64));
  CHECK(verify_host(leaf.get(), ca.certificate(), host.c_str()) == X509_V_OK);
}

TEST_CASE("leaf cache refuses an empty host", "[certs][leaf]") {
  auto ca = certificate_authority::generate("empty CA");
  leaf_cache cache(ca);
  CHECK_THROWS_AS(cache.get(""), ca_error);
  CHECK(cache.size() == 0);
}

TEST_CASE("leaf cache evicts the least recently used host", "[certs][leaf]") {
  auto ca = certificate_authority::generate("lru CA");
  leaf_cache cache(ca, 2);
  CHECK(cache.capacity() == 2);
  auto a = cache.get("a.example");
  auto b = cache.get("b.example");
  CHECK(cache.get("a.example") == a);  // a hit: the same leaf, and a is now most recent
  CHECK(cache.minted() == 2);
  auto c = cache.get("c.example");  // evicts b
  CHECK(cache.minted() == 3);
  CHECK(cache.size() == 2);

  CHECK(cache.get("a.example") == a);
  CHECK(cache.minted() == 3);
  auto b2 = cache.get("b.example");
  CHECK(cache.minted() == 4);
  CHECK(b2 != b);
  CHECK(cache.size() == 2);
  // An evicted leaf stays usable by whoever still holds it.
  CHECK(verify_host(b.get(), ca.certificate(), "b.example") == X509_V_OK);
}

TEST_CASE("leaf cache returns the same leaf on a hit", "[certs][leaf]") {
  auto ca = certificate_authority::generate("hit CA");
  leaf_cache cache(ca);
  auto first = cache.get("x.example");
  auto second = cache.get("x.example");
  CHECK(first.get() == second.get());
  CHECK(cache.minted() == 1);
  CHECK(cache.get("y.example") != first);
}

TEST_CASE("leaf cache is safe under concurrent gets", "[certs][leaf]") {
  auto ca = certificate_authority::generate("threads CA");
  leaf_cache cache(ca, 8);
  constexpr int threads = 6;
  constexpr int rounds = 150;
  std::vector<std::vector<std::string>> mismatches(threads);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (int i = 0; i < rounds; ++i) {
        const std::string host = "h" + std::to_string((i * 7 + t) % 20) + ".example";
        auto leaf = cache.get(host);
        if (!leaf || common_name(leaf.get()) != host) mismatches[t].push_back(host);
      }
    });
  }
  for (auto& w : workers) w.join();
  for (const auto& m : mismatches) CHECK(m.empty());
  CHECK(cache.size() <= 8);
  CHECK(cache.minted() >= 20);
}

TEST_CASE("leaf cache hands every concurrent caller of one host the same leaf", "[certs][leaf]") {
  auto ca = certificate_authority::generate("race CA");
  leaf_cache cache(ca);
  constexpr int threads = 6;
  std::vector<std::shared_ptr<X509>> leaves(threads);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] { leaves[t] = cache.get("same.example"); });
  for (auto& w : workers) w.join();
  std::set<X509*> distinct;
  for (const auto& leaf : leaves) distinct.insert(leaf.get());
  CHECK(distinct.size() == 1);
  CHECK(cache.size() == 1);
}
