// certificate_authority::load and ::save: the persistent CA directory of `broker serve`.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <system_error>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "base/atomic_file.hpp"
#include "certs/ca.hpp"
#include "certs/openssl_util.hpp"

namespace broker::certs {

namespace {

namespace fs = std::filesystem;

std::string errno_text() {
  return std::error_code(errno, std::generic_category()).message();
}

std::string octal_mode(mode_t mode) {
  std::array<char, 8> text{};
  std::snprintf(text.data(), text.size(), "%04o", static_cast<unsigned>(mode & 07777));
  return text.data();
}

// An encrypted key would otherwise make OpenSSL prompt on the terminal.
int no_passphrase(char*, int, int, void*) {
  return -1;
}

std::string symlink_refusal(const fs::path& key) {
  return "refusing the CA key " + key.string() +
         ": it is a symlink; put the key file itself there (mode 600)";
}

// The key is opened without following a symlink and checked on the open descriptor, so the file
// checked is the file read.
pkey_ptr read_key(const fs::path& file) {
  struct stat st {};
  if (::lstat(file.c_str(), &st) != 0)
    throw ca_error("cannot read the CA key " + file.string() + ": " + errno_text());
  if (S_ISLNK(st.st_mode)) throw ca_error(symlink_refusal(file));
  const int fd = ::open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ELOOP) throw ca_error(symlink_refusal(file));
    throw ca_error("cannot read the CA key " + file.string() + ": " + errno_text());
  }
  bio_ptr bio(BIO_new_fd(fd, BIO_CLOSE));
  if (!bio) {
    ::close(fd);
    throw_openssl("cannot read the CA key " + file.string());
  }
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    throw ca_error("refusing the CA key " + file.string() + ": not a regular file");
  if ((st.st_mode & 077) != 0) {
    throw ca_error("refusing the CA key " + file.string() + ": mode " + octal_mode(st.st_mode) +
                   " lets group or others access it; run `chmod 600 " + file.string() + "`");
  }
  pkey_ptr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, no_passphrase, nullptr));
  if (!key) throw_openssl("cannot parse the CA key " + file.string());
  return key;
}

x509_ptr read_certificate(const fs::path& file) {
  bio_ptr bio(BIO_new_file(file.c_str(), "r"));
  if (!bio) {
    ERR_clear_error();
    throw ca_error("cannot read the CA certificate " + file.string() + ": " + errno_text());
  }
  x509_ptr cert(PEM_read_bio_X509(bio.get(), nullptr, no_passphrase, nullptr));
  if (!cert) throw_openssl("cannot parse the CA certificate " + file.string());
  return cert;
}

// Parents get the usual umask modes; the CA directory itself is private to its owner.
void ensure_directory(const fs::path& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) throw ca_error(dir.string() + " exists and is not a directory");
    return;
  }
  if (errno != ENOENT) throw ca_error("cannot use " + dir.string() + ": " + errno_text());
  std::error_code ec;
  if (dir.has_parent_path()) fs::create_directories(dir.parent_path(), ec);
  if (ec) throw ca_error("cannot create " + dir.parent_path().string() + ": " + ec.message());
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    throw ca_error("cannot create " + dir.string() + ": " + errno_text());
}

}  // namespace

fs::path certificate_authority::cert_path(const fs::path& dir) {
  return dir / "ca.pem";
}

fs::path certificate_authority::key_path(const fs::path& dir) {
  return dir / "ca.key";
}

certificate_authority certificate_authority::load(const fs::path& dir) {
  const auto key_file = key_path(dir);
  const auto cert_file = cert_path(dir);
  auto key = read_key(key_file);
  auto cert = read_certificate(cert_file);
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    throw ca_error("the CA key " + key_file.string() + " does not match the certificate " +
                   cert_file.string());
  }
  // 1 is an X.509v3 CA (basicConstraints CA:TRUE, keyCertSign when keyUsage is present); the
  // other non-zero answers are legacy v1 self-signed roots and Netscape types, not for signing.
  if (X509_check_ca(cert.get()) != 1)
    throw ca_error("the CA certificate " + cert_file.string() + " is not a CA (CA:TRUE missing)");
  return certificate_authority(std::move(cert), std::move(key));
}

void certificate_authority::save(const fs::path& dir) const {
  ensure_directory(dir);
  const auto key_file = key_path(dir);
  struct stat st {};
  if (::lstat(key_file.c_str(), &st) == 0 && S_ISLNK(st.st_mode))
    throw ca_error("refusing to replace the symlink " + key_file.string() +
                   " with the CA key; remove it first");
  // A secure-heap BIO: its buffer is cleansed when freed, so the PEM leaves no copy behind.
  bio_ptr bio(BIO_new(BIO_s_secmem()));
  if (!bio ||
      PEM_write_bio_PrivateKey(bio.get(), key_.get(), nullptr, nullptr, 0, nullptr, nullptr) != 1)
    throw_openssl("cannot encode the CA key");
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  if (size <= 0) throw ca_error("cannot encode the CA key");
  base::write_file_atomically(key_file, std::string_view(data, static_cast<std::size_t>(size)),
                              0600);
  base::write_file_atomically(cert_path(dir), certificate_pem(), 0644);
}

}  // namespace broker::certs
