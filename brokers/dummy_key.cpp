#include "brokers/dummy_key.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include <openssl/rand.h>

#include "base/atomic_file.hpp"
#include "base/text.hpp"
#include "brokers/dummy.hpp"

namespace broker::brokers {
namespace {

constexpr std::size_t key_size = 32;

[[noreturn]] void fail(const std::filesystem::path& path, const std::string& why) {
  throw std::runtime_error(path.string() + ": " + why);
}

void create_key(const std::filesystem::path& path) {
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  ::chmod(path.parent_path().c_str(), 0700);
  std::array<unsigned char, key_size> raw{};
  if (RAND_bytes(raw.data(), static_cast<int>(raw.size())) != 1)
    fail(path, "the system random number generator failed");
  std::string text;
  text.reserve(2 * key_size + 1);
  base::append_hex(text, std::string_view(reinterpret_cast<const char*>(raw.data()), raw.size()));
  text.push_back('\n');
  const base::secret held(std::move(text));
  std::fill(raw.begin(), raw.end(), 0);
  base::create_file_once(path, held.expose(), 0600);
}

// The key's bytes from the file's text: 64 hex digits (either case), a newline allowed.
std::optional<base::secret> parse_key(std::string_view text) {
  if (text.ends_with('\n')) text.remove_suffix(1);
  if (text.size() != 2 * key_size) return std::nullopt;
  auto bytes = base::hex_decode(text);
  if (!bytes) return std::nullopt;
  return base::secret(std::move(*bytes));
}

base::secret read_key(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) fail(path, std::strerror(errno));
  struct closer {
    int fd;
    ~closer() { ::close(fd); }
  } close_it{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail(path, std::strerror(errno));
  if (!S_ISREG(st.st_mode)) fail(path, "not a regular file");
  if ((st.st_mode & 077) != 0 || st.st_uid != ::geteuid())
    fail(path, "the dummy key must be this user's and private (chmod 600)");
  std::string text(2 * key_size + 2, '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      base::wipe(text);
      fail(path, std::strerror(errno));
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  std::optional<base::secret> key = parse_key(std::string_view(text).substr(0, got));
  base::wipe(text);
  if (!key) fail(path, "not a broker dummy key (64 hex digits)");
  return std::move(*key);
}

}  // namespace

std::filesystem::path default_dummy_key_path() {
  const char* home = std::getenv("HOME");
  if (!home || *home != '/') return {};
  return std::filesystem::path(home) / ".config" / "broker" / "dummy-key";
}

base::secret load_or_create_dummy_key(const std::filesystem::path& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) < 0) {
    if (errno != ENOENT) fail(path, std::strerror(errno));
    create_key(path);
  }
  return read_key(path);
}

stable_dummies::stable_dummies(base::secret key) : key_(std::move(key)) {}

stable_dummies::stable_dummies(std::filesystem::path file) : file_(std::move(file)) {}

std::string stable_dummies::dummy(const base::secret& real, std::string_view credential,
                                  std::string_view field) const {
  std::lock_guard lock(mutex_);
  if (!key_) {
    if (file_.empty())
      throw std::runtime_error(
          "HOME is not set: wrap's dummies are derived with a per-user key under "
          "$HOME/.config/broker");
    key_ = load_or_create_dummy_key(file_);
  }
  return keyed_dummy(*key_, real, credential, field);
}

}  // namespace broker::brokers
