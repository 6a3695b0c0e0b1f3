#include <sys/stat.h>

#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>
#include <string>

#include "certs/ca.hpp"
#include "certs/trust_bundle.hpp"
#include "tests/unit/temp_dir.hpp"

namespace fs = std::filesystem;
using broker::certs::ca_error;
using broker::certs::certificate_authority;
using broker::certs::write_trust_bundle;

namespace {

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  REQUIRE(in);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

TEST_CASE("trust bundle holds the system roots then the CA", "[certs][trust]") {
  broker::test::temp_dir tmp;
  auto ca = certificate_authority::generate("bundle CA");
  const auto bundle_file = tmp.path / "bundle.pem";
  write_trust_bundle(bundle_file, ca);
  const auto bundle = read_all(bundle_file);
  CHECK(ends_with(bundle, ca.certificate_pem()));
  const auto roots = broker::certs::system_roots_file();
  if (roots.empty()) {
    CHECK(bundle == ca.certificate_pem());
  } else {
    const auto system = read_all(roots);
    CHECK(bundle.rfind(system, 0) == 0);
    CHECK(bundle.size() >= system.size() + ca.certificate_pem().size());
  }
  struct stat st {};
  REQUIRE(::stat(bundle_file.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0644);
}

TEST_CASE("trust bundle separates roots without a final newline", "[certs][trust]") {
  broker::test::temp_dir tmp;
  auto ca = certificate_authority::generate("newline CA");
  const auto roots = tmp.path / "roots.pem";
  const std::string root_text = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----";
  write_text(roots, root_text);
  write_trust_bundle(tmp.path / "a.pem", ca, roots);
  CHECK(read_all(tmp.path / "a.pem") == root_text + "\n" + ca.certificate_pem());

  write_text(roots, root_text + "\n");
  write_trust_bundle(tmp.path / "b.pem", ca, roots);
  CHECK(read_all(tmp.path / "b.pem") == root_text + "\n" + ca.certificate_pem());
}

TEST_CASE("trust bundle without system roots holds the CA alone", "[certs][trust]") {
  broker::test::temp_dir tmp;
  auto ca = certificate_authority::generate("alone CA");
  write_trust_bundle(tmp.path / "ca-only.pem", ca, fs::path());
  CHECK(read_all(tmp.path / "ca-only.pem") == ca.certificate_pem());
}

TEST_CASE("trust bundle replaces an existing file and is 0644 under any umask", "[certs][trust]") {
  broker::test::temp_dir tmp;
  const auto file = tmp.path / "bundle.pem";
  write_text(file, "old content");
  auto ca = certificate_authority::generate("replace CA");
  const mode_t old_mask = ::umask(0077);
  write_trust_bundle(file, ca, fs::path());
  ::umask(old_mask);
  CHECK(read_all(file) == ca.certificate_pem());
  struct stat st {};
  REQUIRE(::stat(file.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0644);
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(tmp.path)) ++entries;
  CHECK(entries == 1);
}

TEST_CASE("trust bundle reports unreadable roots and unwritable targets", "[certs][trust]") {
  broker::test::temp_dir tmp;
  auto ca = certificate_authority::generate("error CA");
  CHECK_THROWS_AS(write_trust_bundle(tmp.path / "x.pem", ca, tmp.path / "missing.pem"), ca_error);
  const auto target = tmp.path / "no" / "such" / "dir" / "bundle.pem";
  CHECK_THROWS_WITH(write_trust_bundle(target, ca, fs::path()), Catch::Contains(target.string()));
}
