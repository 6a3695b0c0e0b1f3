#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <regex>
#include <string>

#include <openssl/core_names.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "certs/ca.hpp"
#include "certs/leaf_cache.hpp"
#include "tests/unit/temp_dir.hpp"

namespace fs = std::filesystem;
using broker::certs::ca_error;
using broker::certs::certificate_authority;

namespace {

mode_t file_mode(const fs::path& p) {
  struct stat st {};
  REQUIRE(::lstat(p.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

// The what() of the ca_error that load() throws, or nullopt when it loads.
std::optional<std::string> load_error(const fs::path& dir) {
  try {
    certificate_authority::load(dir);
  } catch (const ca_error& e) {
    return std::string(e.what());
  }
  return std::nullopt;
}

// Restores an environment variable at scope exit.
struct saved_env {
  std::string name;
  std::optional<std::string> value;
  explicit saved_env(std::string n) : name(std::move(n)) {
    if (const char* v = std::getenv(name.c_str())) value = v;
  }
  ~saved_env() {
    if (value)
      ::setenv(name.c_str(), value->c_str(), 1);
    else
      ::unsetenv(name.c_str());
  }
};

}  // namespace

TEST_CASE("ca generate makes a self-signed P-256 CA", "[certs][ca]") {
  auto ca = certificate_authority::generate("test CA s-1234");
  X509* cert = ca.certificate();
  CHECK(X509_check_ca(cert) == 1);
  CHECK(X509_get_version(cert) == X509_VERSION_3);
  CHECK(X509_verify(cert, X509_get0_pubkey(cert)) == 1);
  CHECK(X509_check_private_key(cert, ca.key()) == 1);
  CHECK(X509_NAME_cmp(X509_get_subject_name(cert), X509_get_issuer_name(cert)) == 0);

  REQUIRE(EVP_PKEY_get_base_id(ca.key()) == EVP_PKEY_EC);
  char group[64] = {};
  size_t group_len = 0;
  REQUIRE(EVP_PKEY_get_utf8_string_param(ca.key(), OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof group,
                                         &group_len) == 1);
  CHECK(std::string(group) == "prime256v1");
  CHECK(X509_get_signature_nid(cert) == NID_ecdsa_with_SHA256);

  int critical = -1;
  auto* bc = static_cast<BASIC_CONSTRAINTS*>(
      X509_get_ext_d2i(cert, NID_basic_constraints, &critical, nullptr));
  REQUIRE(bc != nullptr);
  CHECK(critical == 1);
  CHECK(bc->ca != 0);
  CHECK(ASN1_INTEGER_get(bc->pathlen) == 0);
  BASIC_CONSTRAINTS_free(bc);
  CHECK((X509_get_key_usage(cert) & (KU_KEY_CERT_SIGN | KU_CRL_SIGN)) ==
        (KU_KEY_CERT_SIGN | KU_CRL_SIGN));
  CHECK(X509_get0_subject_key_id(cert) != nullptr);

  CHECK(ca.subject() == "CN=test CA s-1234,O=broker");
}

TEST_CASE("ca generate sets a random positive serial and the validity window", "[certs][ca]") {
  auto a = certificate_authority::generate("a", 10);
  auto b = certificate_authority::generate("b", 10);
  const ASN1_INTEGER* sa = X509_get0_serialNumber(a.certificate());
  CHECK(ASN1_STRING_type(sa) == V_ASN1_INTEGER);  // V_ASN1_NEG_INTEGER when negative
  CHECK(ASN1_STRING_length(sa) >= 8);
  CHECK(ASN1_INTEGER_cmp(sa, X509_get0_serialNumber(b.certificate())) != 0);

  int days = 0, secs = 0;
  REQUIRE(ASN1_TIME_diff(&days, &secs, nullptr, X509_get0_notBefore(a.certificate())) == 1);
  CHECK(days * 86400 + secs <= -86000);  // about one day ago
  CHECK(days * 86400 + secs >= -86500);
  REQUIRE(ASN1_TIME_diff(&days, &secs, nullptr, X509_get0_notAfter(a.certificate())) == 1);
  CHECK((days == 9 || days == 10));
}

TEST_CASE("ca generate refuses an unusable common name", "[certs][ca]") {
  CHECK_THROWS_AS(certificate_authority::generate(""), ca_error);
  CHECK_THROWS_AS(certificate_authority::generate(std::string(65, 'x')), ca_error);
  CHECK_NOTHROW(certificate_authority::generate(std::string(64, 'x')));
}

TEST_CASE("ca fingerprint, pem and not_after formats", "[certs][ca]") {
  auto ca = certificate_authority::generate("fmt CA");
  const auto fp = ca.fingerprint();
  CHECK(std::regex_match(fp, std::regex("SHA256 [0-9A-F]{2}(:[0-9A-F]{2}){31}")));
  CHECK(std::regex_match(ca.not_after(), std::regex(R"(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC)")));

  const auto pem = ca.certificate_pem();
  CHECK(pem.rfind("-----BEGIN CERTIFICATE-----\n", 0) == 0);
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* parsed = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  REQUIRE(parsed != nullptr);
  CHECK(X509_cmp(parsed, ca.certificate()) == 0);
  X509_free(parsed);
  CHECK(pem.find("PRIVATE") == std::string::npos);
}

TEST_CASE("ca save then load round-trips with private file modes", "[certs][ca]") {
  broker::test::temp_dir tmp;
  const auto dir = tmp.path / "config" / "broker" / "ca";
  auto ca = certificate_authority::generate("round trip CA");
  ca.save(dir);
  CHECK(file_mode(dir) == 0700);
  CHECK(file_mode(certificate_authority::key_path(dir)) == 0600);
  CHECK(file_mode(certificate_authority::cert_path(dir)) == 0644);
  CHECK(certificate_authority::key_path(dir) == dir / "ca.key");
  CHECK(certificate_authority::cert_path(dir) == dir / "ca.pem");

  auto loaded = certificate_authority::load(dir);
  CHECK(loaded.fingerprint() == ca.fingerprint());
  CHECK(loaded.subject() == ca.subject());
  CHECK(EVP_PKEY_eq(loaded.key(), ca.key()) == 1);

  // Saving again replaces both files and leaves no temp file behind.
  auto other = certificate_authority::generate("second CA");
  other.save(dir);
  CHECK(certificate_authority::load(dir).fingerprint() == other.fingerprint());
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++entries;
  CHECK(entries == 2);
}

TEST_CASE("ca save sets exact modes whatever the umask", "[certs][ca]") {
  broker::test::temp_dir tmp;
  const mode_t old_mask = ::umask(0077);
  certificate_authority::generate("umask CA").save(tmp.path);
  ::umask(old_mask);
  CHECK(file_mode(tmp.path / "ca.pem") == 0644);
  CHECK(file_mode(tmp.path / "ca.key") == 0600);
}

TEST_CASE("ca load refuses a key readable by group or others", "[certs][ca]") {
  broker::test::temp_dir tmp;
  certificate_authority::generate("perm CA").save(tmp.path);
  const auto key = certificate_authority::key_path(tmp.path);
  for (mode_t mode : {0640, 0644, 0604, 0620}) {
    REQUIRE(::chmod(key.c_str(), mode) == 0);
    const auto error = load_error(tmp.path);
    REQUIRE(error);
    CHECK_THAT(*error, Catch::Contains(key.string()));
    CHECK_THAT(*error, Catch::Contains("chmod 600 " + key.string()));
  }
  REQUIRE(::chmod(key.c_str(), 0400) == 0);  // owner-only read is fine
  CHECK_FALSE(load_error(tmp.path));
}

TEST_CASE("ca load and save refuse a symlinked key", "[certs][ca]") {
  broker::test::temp_dir tmp;
  const auto dir = tmp.path / "ca";
  auto ca = certificate_authority::generate("link CA");
  ca.save(dir);
  const auto key = certificate_authority::key_path(dir);
  const auto real = tmp.path / "real.key";
  fs::rename(key, real);
  fs::create_symlink(real, key);
  const auto error = load_error(dir);
  REQUIRE(error);
  CHECK_THAT(*error, Catch::Contains(key.string()));
  CHECK_THAT(*error, Catch::Contains("symlink"));

  CHECK_THROWS_WITH(ca.save(dir), Catch::Contains("symlink") && Catch::Contains(key.string()));
  CHECK(fs::is_symlink(key));  // left alone
}

TEST_CASE("ca load refuses a key of another CA", "[certs][ca]") {
  broker::test::temp_dir tmp;
  certificate_authority::generate("one").save(tmp.path / "one");
  certificate_authority::generate("two").save(tmp.path / "two");
  fs::copy_file(tmp.path / "two" / "ca.key", tmp.path / "one" / "ca.key",
                fs::copy_options::overwrite_existing);
  const auto error = load_error(tmp.path / "one");
  REQUIRE(error);
  CHECK_THAT(*error, Catch::Contains("does not match"));
}

TEST_CASE("ca load refuses a certificate that is not a CA", "[certs][ca]") {
  broker::test::temp_dir tmp;
  auto ca = certificate_authority::generate("issuer");
  broker::certs::leaf_cache leaves(ca);
  auto leaf = leaves.get("leaf.example");
  {
    std::ofstream pem(tmp.path / "ca.pem");
    BIO* bio = BIO_new(BIO_s_mem());
    PEM_write_bio_X509(bio, leaf.get());
    char* data = nullptr;
    const long n = BIO_get_mem_data(bio, &data);
    pem.write(data, n);
    BIO_free(bio);
  }
  const auto key = tmp.path / "ca.key";
  FILE* f = std::fopen(key.c_str(), "w");
  REQUIRE(f != nullptr);
  PEM_write_PrivateKey(f, leaves.key(), nullptr, nullptr, 0, nullptr, nullptr);
  std::fclose(f);
  REQUIRE(::chmod(key.c_str(), 0600) == 0);
  const auto error = load_error(tmp.path);
  REQUIRE(error);
  CHECK_THAT(*error, Catch::Contains("not a CA"));
}

TEST_CASE("ca load of a missing directory names the file", "[certs][ca]") {
  broker::test::temp_dir tmp;
  const auto error = load_error(tmp.path / "nowhere");
  REQUIRE(error);
  CHECK_THAT(*error, Catch::Contains((tmp.path / "nowhere" / "ca.key").string()));
}

TEST_CASE("ca default_ca_dir follows XDG_CONFIG_HOME then HOME", "[certs][ca]") {
  saved_env xdg("XDG_CONFIG_HOME");
  saved_env home("HOME");
  ::setenv("HOME", "/home/someone", 1);
  ::setenv("XDG_CONFIG_HOME", "/xdg/config", 1);
  CHECK(broker::certs::default_ca_dir() == fs::path("/xdg/config/broker/ca"));
  ::setenv("XDG_CONFIG_HOME", "relative/config", 1);  // invalid per the XDG spec: ignored
  CHECK(broker::certs::default_ca_dir() == fs::path("/home/someone/.config/broker/ca"));
  ::unsetenv("XDG_CONFIG_HOME");
  CHECK(broker::certs::default_ca_dir() == fs::path("/home/someone/.config/broker/ca"));
  ::unsetenv("HOME");
  CHECK(broker::certs::default_ca_dir().empty());
}
