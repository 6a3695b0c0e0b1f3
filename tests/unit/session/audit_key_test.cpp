#include "session/audit_key.hpp"

#include <sys/stat.h>

#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "session/audit_log.hpp"
#include "session/log_reader.hpp"
#include "tests/unit/temp_dir.hpp"

namespace fs = std::filesystem;
using broker::session::audit_key;
using broker::session::audit_log;
using broker::session::head_signature_valid;
using nlohmann::ordered_json;

namespace {

std::string read(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

broker::session::verify_result verify_text(const std::string& text) {
  std::istringstream in(text);
  return broker::session::verify_log(in);
}

// A session of two requests and a signed end, as its text.
std::string signed_session(const fs::path& dir, std::shared_ptr<const audit_key> key) {
  auto log = audit_log::open(dir, "s-1");
  log->sign_with(std::move(key));
  log->write({{"event", "session_start"}});
  log->write({{"event", "refused"}, {"host", "evil.test"}});
  log->write({{"event", "request"}, {"host", "api.github.com"}});
  log->end({{"event", "session_end"}, {"requests", 2}});
  return read(dir / "s-1.jsonl");
}

// Rewrites every hash from line `from` on, as an editor without the key can.
std::string rechain(std::vector<std::string> lines) {
  std::string prev(broker::session::zero_hash), out;
  for (auto& line : lines) {
    const auto p = line.find("\"prev\":\"") + 8;
    line.replace(p, 64, prev);
    const auto h = line.rfind(",\"hash\":\"");
    line.resize(h);
    line += "}";
    prev = broker::session::chain_hash(prev, line);
    line.pop_back();
    out += line + ",\"hash\":\"" + prev + "\"}\n";
  }
  return out;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

TEST_CASE("audit_key: made once, private, the same key for every later session", "[audit_key]") {
  broker::test::temp_dir t;
  const auto path = t.path / "config" / "broker" / "audit-key";
  const auto first = audit_key::load_or_create(path);
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  REQUIRE(::stat(path.parent_path().c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  CHECK(first.public_key_hex().size() == 64);
  CHECK(audit_key::load_or_create(path).public_key_hex() == first.public_key_hex());
  CHECK(audit_key::load(path).public_key_hex() == first.public_key_hex());
  CHECK(read(path).find("PRIVATE KEY") != std::string::npos);
  CHECK(std::distance(fs::directory_iterator(path.parent_path()), fs::directory_iterator()) == 1);
}

TEST_CASE("audit_key: a key others can read, or not a key, is refused", "[audit_key]") {
  broker::test::temp_dir t;
  const auto path = t.path / "audit-key";
  audit_key::load_or_create(path);
  ::chmod(path.c_str(), 0644);
  CHECK_THROWS_WITH(audit_key::load_or_create(path), Catch::Contains("chmod 600"));
  std::ofstream(t.path / "junk") << "not a key\n";
  ::chmod((t.path / "junk").c_str(), 0600);
  CHECK_THROWS_WITH(audit_key::load_or_create(t.path / "junk"), Catch::Contains("Ed25519"));
}

TEST_CASE("audit_key: OpenSSL's PKCS#8 form is read as the key it holds", "[audit_key]") {
  // RFC 8410 §10.3's example seed; its public key as `openssl pkey -pubout` gives it.
  broker::test::temp_dir t;
  const auto path = t.path / "audit-key";
  std::ofstream(path) << "-----BEGIN PRIVATE KEY-----\n"
                         "MC4CAQAwBQYDK2VwBCIEINTuctv5E1hK1bbY8fdp+K06/nwoy/HU++CXqI9EdVhC\n"
                         "-----END PRIVATE KEY-----\n";
  ::chmod(path.c_str(), 0600);
  const auto key = audit_key::load_or_create(path);
  CHECK(key.public_key_hex() == "19bf44096984cdfe8541bac167dc3b96c85086aa30b6b6cb0c5c38ad703166e1");
  const std::string head(64, 'c');
  CHECK(head_signature_valid(key.public_key_hex(), head, key.sign_head(head)));
  // A public key file (to verify with) and another algorithm's private key still go through
  // OpenSSL's decoders: the first is read, the second refused as not Ed25519.
  std::ofstream(t.path / "public")
      << "-----BEGIN PUBLIC KEY-----\n"
         "MCowBQYDK2VwAyEAGb9ECWmEzf6FQbrBZ9w7lshQhqowtrbLDFw4rXAxZuE=\n"
         "-----END PUBLIC KEY-----\n";
  CHECK(audit_key::load(t.path / "public").public_key_hex() == key.public_key_hex());
  std::ofstream(t.path / "ec")
      << "-----BEGIN PRIVATE KEY-----\n"
         "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg0gPgWu5Th3t84vGY\n"
         "bTk/7JpU6lRy5pQ/T9qY50TFwIGhRANCAAQ8WPom3wuDroa6Mpb96xWlPG0kbFAm\n"
         "KiU9rqqIqOSjwnN01BesEM6KDoK3whkUbnRtPBA/6en9ppTANa8zuQed\n"
         "-----END PRIVATE KEY-----\n";
  ::chmod((t.path / "ec").c_str(), 0600);
  CHECK_THROWS_WITH(audit_key::load_or_create(t.path / "ec"), Catch::Contains("Ed25519"));
}

TEST_CASE("audit_key: a head signature holds for that head and key only", "[audit_key]") {
  broker::test::temp_dir t;
  const auto key = audit_key::load_or_create(t.path / "a");
  const auto other = audit_key::load_or_create(t.path / "b");
  const std::string head(64, 'a');
  const std::string signature = key.sign_head(head);
  CHECK(signature.size() == 128);
  CHECK(head_signature_valid(key.public_key_hex(), head, signature));
  CHECK_FALSE(head_signature_valid(other.public_key_hex(), head, signature));
  CHECK_FALSE(head_signature_valid(key.public_key_hex(), std::string(64, 'b'), signature));
  CHECK_FALSE(head_signature_valid(key.public_key_hex(), head, std::string(128, '0')));
  CHECK_FALSE(head_signature_valid("zz", head, signature));
}

TEST_CASE("audit_log::end signs the chain head; verify_log checks it", "[audit_key]") {
  broker::test::temp_dir t;
  const auto shared = std::make_shared<const audit_key>(audit_key::load_or_create(t.path / "key"));
  const audit_key& key = *shared;
  const std::string text = signed_session(t.path / "logs", shared);
  const auto lines = lines_of(text);
  REQUIRE(lines.size() == 4);
  CHECK(lines[3].find(",\"signature\":{\"alg\":\"ed25519\",\"key\":\"" + key.public_key_hex()) !=
        std::string::npos);
  CHECK(lines[2].find("signature") == std::string::npos);  // only the end is signed

  auto result = verify_text(text);
  CHECK(result.ok);
  CHECK(result.has_end);
  CHECK(result.signer == key.public_key_hex());

  // Without the refused record and re-chained: the chain holds, the signature does not.
  auto forged = lines;
  forged.erase(forged.begin() + 1);
  for (std::size_t i = 1; i < forged.size(); ++i) {
    const auto s = forged[i].find("\"seq\":") + 6;
    forged[i].replace(s, 1, std::to_string(i + 1));
  }
  result = verify_text(rechain(forged));
  CHECK_FALSE(result.ok);
  CHECK(result.bad_line == 3);
  CHECK(result.error.find("signature") != std::string::npos);

  // The same with the signature dropped: intact, and unsigned.
  auto bare = forged;
  bare.back().erase(bare.back().find(",\"signature\":{"),
                    bare.back().find("},\"hash\"") + 1 - bare.back().find(",\"signature\":{"));
  result = verify_text(rechain(bare));
  CHECK(result.ok);
  CHECK(result.signer.empty());

  // An unsigned end from a log with no key.
  auto log = audit_log::open(t.path / "plain", "s-2");
  log->end({{"event", "session_end"}});
  result = verify_text(read(t.path / "plain" / "s-2.jsonl"));
  CHECK(result.ok);
  CHECK(result.signer.empty());
}

TEST_CASE("audit_log::replaced notices the file was swapped under it", "[audit_key]") {
  broker::test::temp_dir t;
  auto log = audit_log::open(t.path, "s-3");
  log->write({{"event", "session_start"}});
  CHECK_FALSE(log->replaced());
  fs::remove(t.path / "s-3.jsonl");
  std::ofstream(t.path / "s-3.jsonl") << "forged\n";
  CHECK(log->replaced());
}
