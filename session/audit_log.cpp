#include "session/audit_log.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <optional>
#include <stdexcept>

#include <openssl/evp.h>

#include "session/audit_key.hpp"

namespace broker::session {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

// Resuming reads the file backwards to its last line; a record is a few KiB at most, so a
// "line" longer than this means the file is not one of ours.
constexpr std::size_t max_resume_line = 16 * 1024 * 1024;

std::string errno_reason(const fs::path& path, int err) {
  return path.string() + ": " + std::strerror(err);
}

std::string sha256_of(std::string_view a, std::string_view b) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  bool ok = ctx != nullptr && EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) == 1 &&
            EVP_DigestUpdate(ctx, a.data(), a.size()) == 1 &&
            EVP_DigestUpdate(ctx, b.data(), b.size()) == 1 &&
            EVP_DigestFinal_ex(ctx, digest, &size) == 1;
  EVP_MD_CTX_free(ctx);
  // Only allocation failure gets here; an audit record without a real hash must not be written.
  if (!ok) throw std::runtime_error("SHA-256 failed");
  return lower_hex(digest, size);
}

bool is_hash_hex(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// "2026-11-29T20:15:06.053Z"
std::string utc_timestamp() {
  auto now = std::chrono::system_clock::now();
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
  std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[40];
  std::size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%03dZ", static_cast<int>(ms % 1000));
  return buf;
}

// mkdir -p, but every directory we create is 0700: the log names hosts and paths the agent
// visited, which other local users have no business reading.
std::optional<std::string> make_private_dirs(const fs::path& dir) {
  fs::path current;
  for (const auto& part : dir) {
    current /= part;
    if (::mkdir(current.c_str(), 0700) == 0 || errno == EEXIST) continue;
    int err = errno;
    struct stat st {};
    if (::stat(current.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) continue;
    return errno_reason(current, err);
  }
  return std::nullopt;
}

// Reads the last line of a regular file of `size` bytes, without its newline, or sets `error`.
std::optional<std::string> read_last_line(const fs::path& path, off_t size, std::string& error) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    error = errno_reason(path, errno);
    return std::nullopt;
  }
  std::string tail;  // the bytes from offset `end` to EOF
  off_t end = size;
  // Stop once `tail` holds a newline before its final byte (the record's own newline).
  while (end > 0 && (tail.size() < 2 || tail.find('\n') == tail.size() - 1) &&
         tail.size() <= max_resume_line) {
    off_t begin = std::max<off_t>(0, end - 65536);
    std::string chunk(static_cast<std::size_t>(end - begin), '\0');
    std::size_t got = 0;
    while (got < chunk.size()) {
      ssize_t n = ::pread(fd, chunk.data() + got, chunk.size() - got, begin + got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        error = n < 0 ? errno_reason(path, errno) : path.string() + ": file shrank while reading";
        ::close(fd);
        return std::nullopt;
      }
      got += static_cast<std::size_t>(n);
    }
    tail.insert(0, chunk);
    end = begin;
    if (tail.back() != '\n') {
      // A crash mid-write: appending after it would weld two records into one bad line.
      error = path.string() + ": ends in a partial record; cannot continue its hash chain";
      ::close(fd);
      return std::nullopt;
    }
  }
  ::close(fd);
  tail.pop_back();
  std::size_t newline = tail.rfind('\n');
  if (newline == std::string::npos && end > 0) {
    error = path.string() + ": last record is too long";
    return std::nullopt;
  }
  return newline == std::string::npos ? tail : tail.substr(newline + 1);
}

bool is_reserved_key(const std::string& key) {
  return key == "ts" || key == "session" || key == "seq" || key == "prev" || key == "hash" ||
         key == "signature";
}

}  // namespace

std::string lower_hex(const unsigned char* data, std::size_t size) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out(size * 2, '\0');
  for (std::size_t i = 0; i < size; ++i) {
    out[2 * i] = digits[data[i] >> 4];
    out[2 * i + 1] = digits[data[i] & 0xf];
  }
  return out;
}

std::string sha256_hex(std::string_view data) {
  return sha256_of(data, {});
}

std::string chain_hash(std::string_view prev_hex, std::string_view record_without_hash) {
  return sha256_of(prev_hex, record_without_hash);
}

audit_log::audit_log(std::filesystem::path path, std::string session_id)
    : path_(std::move(path)), session_id_(std::move(session_id)), prev_(zero_hash) {}

audit_log::~audit_log() {
  if (fd_ >= 0) ::close(fd_);
}

std::unique_ptr<audit_log> audit_log::open(const std::filesystem::path& dir,
                                           std::string session_id) {
  // The id becomes a file name: anything that could step outside `dir` is refused.
  bool bad_id = session_id.empty() || session_id == "." || session_id == ".." ||
                session_id.find_first_of(std::string_view("/\0", 2)) != std::string::npos;
  fs::path file = bad_id ? dir / "invalid.jsonl" : dir / (session_id + ".jsonl");
  std::unique_ptr<audit_log> log(new audit_log(std::move(file), std::move(session_id)));
  if (bad_id) {
    log->failure_ = "invalid session id \"" + log->session_id_ + "\"";
    return log;
  }
  if (dir.empty()) {
    log->failure_ = "no log directory";
    return log;
  }
  if (auto error = make_private_dirs(dir)) {
    log->failure_ = *error;
    return log;
  }
  int fd = ::open(log->path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    log->failure_ = errno_reason(log->path_, errno);
    return log;
  }
  log->fd_ = fd;

  // A reused session id continues the existing chain, so `broker log --verify` checks the whole
  // file. Only regular files have a past (a FIFO or device has nothing to read back).
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    log->failure_ = errno_reason(log->path_, errno);
    return log;
  }
  if (!S_ISREG(st.st_mode) || st.st_size == 0) return log;

  std::string error;
  auto last = read_last_line(log->path_, st.st_size, error);
  if (!last) {
    log->failure_ = error;
    return log;
  }
  auto record = nlohmann::json::parse(*last, nullptr, false);
  const nlohmann::json* seq =
      record.is_object() && record.contains("seq") ? &record["seq"] : nullptr;
  const nlohmann::json* hash =
      record.is_object() && record.contains("hash") ? &record["hash"] : nullptr;
  if (seq == nullptr || !seq->is_number_unsigned() || hash == nullptr || !hash->is_string() ||
      !is_hash_hex(hash->get<std::string>())) {
    log->failure_ =
        log->path_.string() + ": last record has no valid seq/hash; cannot continue its hash chain";
    return log;
  }
  log->seq_ = seq->get<std::uint64_t>();
  log->prev_ = hash->get<std::string>();
  return log;
}

bool audit_log::write(const nlohmann::ordered_json& fields) { return append(fields, false); }

bool audit_log::end(const nlohmann::ordered_json& fields) { return append(fields, true); }

void audit_log::sign_with(std::shared_ptr<const audit_key> key) {
  std::lock_guard lock(mutex_);
  key_ = std::move(key);
}

bool audit_log::replaced() const {
  std::lock_guard lock(mutex_);
  struct stat mine {}, named {};
  if (fd_ < 0 || ::fstat(fd_, &mine) != 0) return false;
  return ::stat(path_.c_str(), &named) != 0 || named.st_ino != mine.st_ino ||
         named.st_dev != mine.st_dev;
}

bool audit_log::append(const nlohmann::ordered_json& fields, bool sign) {
  std::lock_guard lock(mutex_);
  if (!failure_.empty()) return false;

  std::string line;
  try {
    ordered_json record;
    record["ts"] = utc_timestamp();
    record["session"] = session_id_;
    record["seq"] = seq_ + 1;
    if (fields.is_object()) {
      // Reserved keys from a caller would duplicate ours and break every reader's view of the
      // chain; they are dropped rather than trusted.
      for (const auto& [key, value] : fields.items()) {
        if (!is_reserved_key(key)) record[key] = value;
      }
    }
    record["prev"] = prev_;
    // replace: hosts, paths and exe names come from the child and may be invalid UTF-8; the
    // record must still be written (with U+FFFD), never dropped by an exception.
    line = record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (sign && key_) {
      // The signature covers the head this record would have had unsigned (DESIGN §8.2), and is
      // then chained like any field.
      const std::string head = chain_hash(prev_, line);
      line.pop_back();
      line += ",\"signature\":{\"alg\":\"ed25519\",\"key\":\"" + key_->public_key_hex() +
              "\",\"sig\":\"" + key_->sign_head(head) + "\"}}";
    }
    std::string hash = chain_hash(prev_, line);
    line.pop_back();  // the closing '}'
    line += ",\"hash\":\"";
    line += hash;
    line += "\"}\n";
    prev_ = std::move(hash);
  } catch (const std::exception& e) {
    failure_ = path_.string() + ": cannot build record: " + e.what();
    return false;
  }

  std::size_t done = 0;
  while (done < line.size()) {
    ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      failure_ = n < 0 ? errno_reason(path_, errno) : path_.string() + ": write made no progress";
      return false;
    }
    done += static_cast<std::size_t>(n);
  }
  ++seq_;
  return true;
}

bool audit_log::failed() const {
  std::lock_guard lock(mutex_);
  return !failure_.empty();
}

std::string audit_log::failure() const {
  std::lock_guard lock(mutex_);
  return failure_;
}

}  // namespace broker::session
