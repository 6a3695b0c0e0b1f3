// Minted credentials' records: sealed, locked while their session lives (minted_records.hpp).
#include "brokers/minted_records.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/text.hpp"

namespace broker::brokers {
namespace {

using clock = std::chrono::system_clock;
constexpr std::size_t nonce_size = 12;  // GCM's
constexpr std::size_t tag_size = 16;

struct cipher_free {
  void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
};

std::string hex(std::string_view bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

// AES-256-GCM of `plain` under `key` with `nonce`, the tag appended; the issuer is bound in as
// associated data.
std::string seal(const base::secret& key, std::string_view nonce, std::string_view issuer,
                 std::string_view plain) {
  std::unique_ptr<EVP_CIPHER_CTX, cipher_free> ctx(EVP_CIPHER_CTX_new());
  std::string out(plain.size() + tag_size, '\0');
  int n = 0, total = 0;
  const auto* k = reinterpret_cast<const unsigned char*>(key.expose().data());
  const auto* iv = reinterpret_cast<const unsigned char*>(nonce.data());
  auto* o = reinterpret_cast<unsigned char*>(out.data());
  if (!ctx || EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, k, iv) != 1 ||
      EVP_EncryptUpdate(ctx.get(), nullptr, &n,
                        reinterpret_cast<const unsigned char*>(issuer.data()),
                        static_cast<int>(issuer.size())) != 1 ||
      EVP_EncryptUpdate(ctx.get(), o, &n, reinterpret_cast<const unsigned char*>(plain.data()),
                        static_cast<int>(plain.size())) != 1)
    throw std::runtime_error("cannot seal a minted credential's record");
  total = n;
  if (EVP_EncryptFinal_ex(ctx.get(), o + total, &n) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, static_cast<int>(tag_size),
                          o + plain.size()) != 1)
    throw std::runtime_error("cannot seal a minted credential's record");
  return out;
}

// The plain text, or nullopt when the record was not sealed under `key` for `issuer`.
std::optional<base::secret> unseal(const base::secret& key, std::string_view nonce,
                                   std::string_view issuer, std::string_view sealed) {
  if (nonce.size() != nonce_size || sealed.size() < tag_size) return std::nullopt;
  const std::size_t size = sealed.size() - tag_size;
  std::unique_ptr<EVP_CIPHER_CTX, cipher_free> ctx(EVP_CIPHER_CTX_new());
  std::string out(size, '\0');
  int n = 0;
  std::string tag(sealed.substr(size));
  const auto* k = reinterpret_cast<const unsigned char*>(key.expose().data());
  const auto* iv = reinterpret_cast<const unsigned char*>(nonce.data());
  auto* o = reinterpret_cast<unsigned char*>(out.data());
  const bool ok =
      ctx && EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, k, iv) == 1 &&
      EVP_DecryptUpdate(ctx.get(), nullptr, &n,
                        reinterpret_cast<const unsigned char*>(issuer.data()),
                        static_cast<int>(issuer.size())) == 1 &&
      EVP_DecryptUpdate(ctx.get(), o, &n, reinterpret_cast<const unsigned char*>(sealed.data()),
                        static_cast<int>(size)) == 1 &&
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, static_cast<int>(tag_size),
                          tag.data()) == 1 &&
      EVP_DecryptFinal_ex(ctx.get(), o + n, &n) == 1;
  if (!ok) {
    base::wipe(out);
    return std::nullopt;
  }
  return base::secret(std::move(out));
}

std::runtime_error record_error(const std::filesystem::path& path, const std::string& why) {
  return std::runtime_error(path.string() + ": " + why);
}

void make_private_dir(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw record_error(dir, ec.message());
  struct stat st {};
  if (::lstat(dir.c_str(), &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid())
    throw record_error(dir, "not a directory of this user's");
  if ((st.st_mode & 077) != 0 && ::chmod(dir.c_str(), 0700) < 0)
    throw record_error(dir, std::strerror(errno));
}

}  // namespace

std::filesystem::path default_minted_dir() {
  const char* home = std::getenv("HOME");
  if (!home || *home != '/') return {};
  return std::filesystem::path(home) / ".config" / "broker" / "minted";
}

base::secret minted_seal_key(const base::secret& signing_key, std::string_view issuer) {
  const std::string label = "broker minted-credential record v1\n" + std::string(issuer);
  std::string key(32, '\0');
  unsigned int length = 0;
  const std::string_view k = signing_key.expose();
  if (!HMAC(EVP_sha256(), k.data(), static_cast<int>(k.size()),
            reinterpret_cast<const unsigned char*>(label.data()), label.size(),
            reinterpret_cast<unsigned char*>(key.data()), &length) ||
      length != key.size())
    throw std::runtime_error("cannot derive a minted credential's sealing key");
  return base::secret(std::move(key));
}

minted_record::minted_record(std::filesystem::path path, int fd, base::secret credential,
                             clock::time_point expires)
    : path_(std::move(path)), fd_(fd), credential_(std::move(credential)), expires_(expires) {}

minted_record::~minted_record() {
  if (fd_ >= 0) ::close(fd_);
}

void minted_record::remove() {
  if (path_.empty()) return;
  std::error_code ec;
  std::filesystem::remove(path_, ec);
}

std::unique_ptr<minted_record> minted_record::write(const std::filesystem::path& dir,
                                                    std::string_view issuer,
                                                    const base::secret& seal_key,
                                                    const base::secret& credential,
                                                    clock::time_point expires) {
  if (dir.empty())
    return std::unique_ptr<minted_record>(
        new minted_record({}, -1, base::secret(std::string(credential.expose())), expires));
  make_private_dir(dir);
  std::string id(16, '\0'), nonce(nonce_size, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(id.data()), static_cast<int>(id.size())) != 1 ||
      RAND_bytes(reinterpret_cast<unsigned char*>(nonce.data()), static_cast<int>(nonce.size())) !=
          1)
    throw std::runtime_error("no random bytes for a minted credential's record");
  const std::filesystem::path path = dir / (hex(id) + ".json");
  const std::filesystem::path temporary = dir / (hex(id) + ".tmp");
  // Locked before it has its name: a session starting meanwhile never sees it unlocked.
  const int fd = ::open(temporary.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) throw record_error(temporary, std::strerror(errno));
  auto record = std::unique_ptr<minted_record>(
      new minted_record(path, fd, base::secret(std::string(credential.expose())), expires));
  if (::flock(fd, LOCK_EX) < 0) {
    const std::string why = std::strerror(errno);
    ::unlink(temporary.c_str());
    throw record_error(temporary, why);
  }
  const nlohmann::json doc = {
      {"issuer", issuer},
      {"expires",
       std::chrono::duration_cast<std::chrono::seconds>(expires.time_since_epoch()).count()},
      {"nonce", hex(nonce)},
      {"sealed", hex(seal(seal_key, nonce, issuer, credential.expose()))}};
  const std::string text = doc.dump() + "\n";
  if (::write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size()) ||
      ::fsync(fd) < 0 || ::rename(temporary.c_str(), path.c_str()) < 0) {
    const std::string why = std::strerror(errno);
    ::unlink(temporary.c_str());
    throw record_error(path, why);
  }
  return record;
}

int revoke_left_records(const std::filesystem::path& dir, std::string_view issuer,
                        const base::secret& seal_key,
                        const std::function<bool(const base::secret&)>& revoke) {
  int revoked = 0;
  std::error_code ec;
  if (dir.empty() || !std::filesystem::is_directory(dir, ec)) return 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.path().extension() != ".json") continue;
    const int fd = ::open(entry.path().c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) continue;
    // Held: its session is alive. Free: the session is gone, and this process now holds it.
    if (::flock(fd, LOCK_EX | LOCK_NB) < 0) {
      ::close(fd);
      continue;
    }
    std::string text;
    char buffer[4096];
    for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) > 0 && text.size() < 65536;)
      text.append(buffer, static_cast<std::size_t>(n));
    const auto doc = nlohmann::json::parse(text, nullptr, false);
    const bool ours = doc.is_object() && doc.value("issuer", "") == issuer &&
                      doc.contains("expires") && doc["expires"].is_number_integer();
    if (ours) {
      const clock::time_point expires{std::chrono::seconds(doc["expires"].get<std::int64_t>())};
      const auto nonce = base::hex_decode(doc.value("nonce", ""));
      const auto sealed = base::hex_decode(doc.value("sealed", ""));
      std::optional<base::secret> credential;
      if (nonce && sealed) credential = unseal(seal_key, *nonce, issuer, *sealed);
      if (expires <= clock::now()) {
        std::filesystem::remove(entry.path(), ec);  // nothing left to revoke
      } else if (credential && revoke(*credential)) {
        std::filesystem::remove(entry.path(), ec);
        ++revoked;
      }
    }
    ::close(fd);
  }
  return revoked;
}

}  // namespace broker::brokers
