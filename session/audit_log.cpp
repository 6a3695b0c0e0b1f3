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
#include <memory>
#include <optional>
#include <stdexcept>

#include <openssl/evp.h>

#include "base/text.hpp"
#include "session/audit_files.hpp"
#include "session/audit_key.hpp"
#include "session/log.hpp"

namespace broker::session {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

std::string sha256_of(std::string_view a, std::string_view b) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  // One digest context per thread, reset by each use: every record is hashed, and a context is
  // an allocation and a free.
  thread_local const std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> context(
      EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  // Fetched once: EVP_sha256() in an init is a fetch from the provider on every record.
  static EVP_MD* const sha256 = EVP_MD_fetch(nullptr, "SHA2-256", nullptr);
  EVP_MD_CTX* ctx = context.get();
  bool ok = ctx != nullptr && sha256 != nullptr && EVP_DigestInit_ex(ctx, sha256, nullptr) == 1 &&
            EVP_DigestUpdate(ctx, a.data(), a.size()) == 1 &&
            EVP_DigestUpdate(ctx, b.data(), b.size()) == 1 &&
            EVP_DigestFinal_ex(ctx, digest, &size) == 1;
  // Only allocation failure gets here; an audit record without a real hash must not be written.
  if (!ok) throw std::runtime_error("SHA-256 failed");
  return base::hex_encode(digest, size);
}

bool is_hash_hex(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// "2026-11-29T20:15:06.053Z". The seconds are formatted once per thread and second.
std::string utc_timestamp(std::chrono::system_clock::time_point now) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
  std::time_t secs = static_cast<std::time_t>(ms / 1000);
  thread_local std::optional<std::time_t> cached_secs;
  thread_local char cached[40];
  thread_local std::size_t cached_size = 0;
  if (cached_secs != secs) {
    std::tm tm{};
    gmtime_r(&secs, &tm);
    cached_size = std::strftime(cached, sizeof cached, "%Y-%m-%dT%H:%M:%S", &tm);
    cached_secs = secs;
  }
  char buf[56];
  std::memcpy(buf, cached, cached_size);
  std::snprintf(buf + cached_size, sizeof buf - cached_size, ".%03dZ", static_cast<int>(ms % 1000));
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

bool is_reserved_key(const std::string& key) {
  return key == "ts" || key == "session" || key == "seq" || key == "prev" || key == "hash" ||
         key == "signature";
}

// The fields of a record as JSON members without the braces (`"k":v,...`), reserved keys dropped:
// a caller's would duplicate the log's own and break every reader's view of the chain. Strings
// that are not valid UTF-8 get U+FFFD: hosts, paths and exe names come from the child, and the
// record must still be written, never dropped by an exception.
std::string member_text(const ordered_json& fields) {
  if (!fields.is_object()) return {};
  base::json_members members;
  for (const auto& [key, value] : fields.items())
    if (!is_reserved_key(key)) members.add_json(key, value);
  return members.text();
}

// A write that failed for want of room may succeed once some is freed; any other failure is
// taken to last.
bool wants_room(int err) {
  return err == ENOSPC || err == EDQUOT;
}

}  // namespace

std::string chain_hash(std::string_view prev_hex, std::string_view record_without_hash) {
  return sha256_of(prev_hex, record_without_hash);
}

audit_log::audit_log(std::filesystem::path dir, std::string session_id, audit_log_options options)
    : dir_(std::move(dir)),
      session_id_(std::move(session_id)),
      options_(std::move(options)),
      prev_(zero_hash) {
  base::append_json_string(session_json_, session_id_);
  if (!options_.clock) options_.clock = [] { return std::chrono::system_clock::now(); };
  if (options_.sync == audit_sync_mode::batch)
    sync_ = std::make_shared<audit_sync_file>(options_.calls.fdatasync);
}

audit_log::~audit_log() {
  if (fd_ >= 0) ::close(fd_);
}

std::unique_ptr<audit_log> audit_log::open(const std::filesystem::path& dir, std::string session_id,
                                           audit_log_options options) {
  // The id becomes a file name: anything that could step outside `dir` is refused.
  bool bad_id = session_id.empty() || session_id == "." || session_id == ".." ||
                session_id.find_first_of(std::string_view("/\0", 2)) != std::string::npos;
  std::unique_ptr<audit_log> log(new audit_log(dir, std::move(session_id), std::move(options)));
  log->path_ = bad_id ? dir / "invalid.jsonl" : single_log_path(dir, log->session_id_);
  if (bad_id) {
    log->fail("invalid session id \"" + log->session_id_ + "\"");
    return log;
  }
  if (!log->options_.replica.empty() && !valid_replica_name(log->options_.replica)) {
    log->fail("invalid replica name \"" + log->options_.replica + "\"");
    return log;
  }
  if (dir.empty()) {
    log->fail("no log directory");
    return log;
  }
  if (auto error = make_private_dirs(dir)) {
    log->fail(*error);
    return log;
  }
  log->open_files();
  return log;
}

// Picks the layout and the file to append to, and continues the replica's chain.
void audit_log::open_files() {
  const std::string replica =
      options_.replica.empty() ? std::string(local_replica) : options_.replica;
  std::vector<audit_file> files;  // this replica's, the single file (generation 0) included
  for (auto& r : session_files(dir_, session_id_))
    if (r.replica == replica) files = std::move(r.files);
  const bool has_generations = !files.empty() && files.back().generation > 0;
  if (options_.rotation.enabled() || !options_.replica.empty() || has_generations) {
    if (auto error = make_private_dirs(dir_ / session_id_)) {
      fail(*error);
      return;
    }
    generation_ = has_generations ? files.back().generation : 1;
    path_ = generation_log_path(dir_, session_id_, replica, generation_);
  }
  int fd = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    const int err = errno;
    fail(errno_reason(path_, err), err);
    return;
  }
  fd_ = fd;
  if (sync_) {
    if (const int err = sync_->follow(fd)) {
      fail(errno_reason(path_, err) + " (a descriptor to sync it)");
      return;
    }
  }

  // A reused session id continues the existing chain, so `broker log --verify` checks all of
  // it. Only regular files have a past (a FIFO or device has nothing to read back).
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    fail(errno_reason(path_, errno));
    return;
  }
  if (!S_ISREG(st.st_mode)) return;
  regular_ = true;
  file_bytes_ = whole_bytes_ = static_cast<std::uint64_t>(st.st_size);
  if (st.st_size > 0) {
    if (!resume_chain(path_, file_bytes_)) return;
    // Age counts from the file's first record; one without a readable ts ages from now.
    file_started_ = first_record_time(path_).value_or(options_.clock());
    return;
  }
  // A new (or still empty) file: the chain goes on from the newest older file with records.
  for (auto it = files.rbegin(); it != files.rend(); ++it) {
    struct stat older {};
    if (it->generation >= generation_ || ::stat(it->path.c_str(), &older) != 0 ||
        !S_ISREG(older.st_mode) || older.st_size == 0)
      continue;
    resume_chain(it->path, static_cast<std::uint64_t>(older.st_size));
    return;
  }
}

// Takes seq and prev from the last record of `file`; false (and failed) when it has none.
bool audit_log::resume_chain(const std::filesystem::path& file, std::uint64_t size) {
  std::string error;
  auto last = read_last_line(file, static_cast<off_t>(size), error);
  if (!last) {
    fail(error);
    return false;
  }
  auto record = nlohmann::json::parse(*last, nullptr, false);
  const nlohmann::json* seq =
      record.is_object() && record.contains("seq") ? &record["seq"] : nullptr;
  const nlohmann::json* hash =
      record.is_object() && record.contains("hash") ? &record["hash"] : nullptr;
  if (seq == nullptr || !seq->is_number_unsigned() || hash == nullptr || !hash->is_string() ||
      !is_hash_hex(hash->get<std::string>())) {
    fail(file.string() + ": last record has no valid seq/hash; cannot continue its hash chain");
    return false;
  }
  seq_ = seq->get<std::uint64_t>();
  prev_ = hash->get<std::string>();
  return true;
}

// Under the lock. The new file exists before the old one is closed, so a reader following the
// log always has a file to read; O_EXCL, because a next generation that already exists means a
// second writer with this replica name, and two chains must not share a file.
void audit_log::rotate_if_due(std::size_t record_bytes, std::chrono::system_clock::time_point now) {
  if (generation_ == 0 || file_bytes_ == 0) return;  // an empty file takes any record
  const auto& rotation = options_.rotation;
  const bool by_size = rotation.max_bytes > 0 && file_bytes_ + record_bytes > rotation.max_bytes;
  const bool by_age =
      rotation.max_age.count() > 0 && file_started_ && now - *file_started_ >= rotation.max_age;
  if (!by_size && !by_age) return;
  // What is staged belongs to the file it was counted in.
  if (!flush_staged()) return;
  const std::string replica =
      options_.replica.empty() ? std::string(local_replica) : options_.replica;
  fs::path next = generation_log_path(dir_, session_id_, replica, generation_ + 1);
  int fd = ::open(next.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    const int err = errno;
    fail(errno_reason(next, err) + " (rotating the audit log)", err);
    return;
  }
  if (sync_) {
    // The file left is synced once more with the next batch.
    if (const int err = sync_->follow(fd)) {
      ::close(fd);
      fail(errno_reason(next, err) + " (a descriptor to sync it)");
      return;
    }
  }
  ::close(fd_);
  fd_ = fd;
  path_ = std::move(next);
  ++generation_;
  file_bytes_ = whole_bytes_ = 0;
  file_started_.reset();
}

bool audit_log::write(const nlohmann::ordered_json& fields) {
  return append_fields(fields, false);
}

bool audit_log::write(const base::json_members& fields) {
  return append(fields.text(), false);
}

bool audit_log::stage(const base::json_members& fields) {
  return append(fields.text(), false, true);
}

bool audit_log::flush() {
  if (!has_staged_.load(std::memory_order_acquire) && !failed()) return true;
  std::lock_guard lock(mutex_);
  return ready(false) && flush_staged();
}

bool audit_log::end(const nlohmann::ordered_json& fields) {
  if (!append_fields(fields, true)) return false;
  if (!sync_) return true;
  // The last record does not wait for the batch: the session is over.
  std::lock_guard lock(mutex_);
  sync_->sync_now();
  return ready(false);
}

void audit_log::sign_with(std::shared_ptr<const audit_key> key) {
  std::lock_guard lock(mutex_);
  key_ = std::move(key);
}

void audit_log::set_sink(std::function<void(std::string_view line)> sink) {
  std::lock_guard lock(mutex_);
  sink_ = std::move(sink);
}

std::filesystem::path audit_log::path() const {
  std::lock_guard lock(mutex_);
  return path_;
}

bool audit_log::replaced() const {
  std::lock_guard lock(mutex_);
  struct stat mine {
  }, named{};
  if (fd_ < 0 || ::fstat(fd_, &mine) != 0) return false;
  return ::stat(path_.c_str(), &named) != 0 || named.st_ino != mine.st_ino ||
         named.st_dev != mine.st_dev;
}

bool audit_log::append_fields(const nlohmann::ordered_json& fields, bool sign) {
  // Serialized before the lock: only what the chain orders (stamp, seq, hash, write) is under it.
  std::string members;
  try {
    members = member_text(fields);
  } catch (const std::exception& e) {
    std::lock_guard lock(mutex_);
    if (failure_.empty()) fail(path_.string() + ": cannot build record: " + e.what());
    return false;
  }
  return append(members, sign);
}

bool audit_log::append(std::string_view members, bool sign, bool staged) {
  std::lock_guard lock(mutex_);
  return add_line(members, sign, staged);
}

bool audit_log::add_line(std::string_view members, bool sign, bool staged) {
  // The session_end does not wait for the next try: it is the last record there is.
  const bool writable = ready(sign);
  if (lasting_ || fd_ < 0) return false;
  if (!writable && staged_.size() >= pending_limit) {
    if (dropped_++ == 0)
      log(spdlog::level::err, log_tag(session_id_),
          "audit records dropped: more than {} bytes of them wait for the log", pending_limit);
    return false;
  }
  const auto now = options_.clock();
  std::string line, hash;
  try {
    line = chained_line(members, sign, now, hash);
  } catch (const std::exception& e) {
    fail(path_.string() + ": cannot build record: " + e.what());
    return false;
  }
  if (writable) rotate_if_due(line.size(), now);
  if (lasting_) return false;
  prev_ = std::move(hash);
  ++seq_;
  file_bytes_ += line.size();
  if (!file_started_) file_started_ = now;
  if (staged_.empty()) {
    staged_ = std::move(line);
  } else {
    staged_ += line;
  }
  has_staged_.store(true, std::memory_order_release);
  if (failed_.load(std::memory_order_relaxed)) return false;  // it waits with the others
  if (staged && staged_.size() < staged_limit) return true;
  return flush_staged();
}

bool audit_log::flush_staged() {
  if (staged_.empty()) return true;
  if (!write_whole(staged_)) return false;
  if (sink_) {
    std::string_view lines = staged_;
    while (!lines.empty()) {
      const auto end = lines.find('\n');
      try {
        sink_(lines.substr(0, end));
      } catch (...) {
        // The record is on disk; a pipeline that cannot take it must not fail the session.
      }
      lines.remove_prefix(end == std::string_view::npos ? lines.size() : end + 1);
    }
  }
  staged_.clear();
  has_staged_.store(false, std::memory_order_release);
  return true;
}

bool audit_log::ready(bool at_once) {
  if (sync_ && !lasting_) {
    if (const int err = sync_->error())
      fail(path_.string() + ": fdatasync: " + std::strerror(err) +
           " (records written may not be on the disk)");
  }
  if (!failed_.load(std::memory_order_relaxed)) return true;
  if (lasting_) return false;
  const auto now = std::chrono::steady_clock::now();
  if (!at_once && now < retry_at_) return false;
  retry_at_ = now + retry_interval;
  return recover();
}

bool audit_log::recover() {
  if (fd_ < 0) open_files();
  if (fd_ < 0 || lasting_) return false;
  const std::size_t waited = staged_.size();
  if (!flush_staged()) return false;
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - failed_at_)
                      .count();
  log(spdlog::level::warn, log_tag(session_id_),
      "audit log written again after {} ms ({} bytes of records that waited written{})", ms, waited,
      dropped_ > 0 ? fmt::format(", {} record(s) dropped", dropped_) : std::string());
  failure_.clear();
  dropped_ = 0;
  failed_.store(false, std::memory_order_release);
  return true;
}

bool audit_log::available() {
  if (!failed_.load(std::memory_order_acquire) && !(sync_ && sync_->error() != 0)) return true;
  std::lock_guard lock(mutex_);
  return ready(false);
}

std::string audit_log::chained_line(std::string_view members, bool sign,
                                    std::chrono::system_clock::time_point now,
                                    std::string& hash) const {
  std::string line;
  line.reserve(members.size() + 256);
  line += "{\"ts\":\"";
  line += utc_timestamp(now);
  line += "\",\"session\":";
  line += session_json_;
  line += ",\"seq\":";
  line += std::to_string(seq_ + 1);
  if (!members.empty()) {
    line += ',';
    line += members;
  }
  line += ",\"prev\":\"";
  line += prev_;
  line += "\"}";
  if (sign && key_) {
    // The signature covers the head this record would have had unsigned (docs/audit-log.md), and is
    // then chained like any field.
    const std::string head = chain_hash(prev_, line);
    line.pop_back();
    line += ",\"signature\":{\"alg\":\"ed25519\",\"key\":\"" + key_->public_key_hex() +
            "\",\"sig\":\"" + key_->sign_head(head) + "\"}}";
  }
  hash = chain_hash(prev_, line);
  line.pop_back();  // the closing '}'
  line += ",\"hash\":\"";
  line += hash;
  line += "\"}\n";
  return line;
}

bool audit_log::write_whole(const std::string& lines) {
  std::size_t done = 0;
  while (done < lines.size()) {
    const ssize_t n = options_.calls.write
                          ? options_.calls.write(fd_, lines.data() + done, lines.size() - done)
                          : ::write(fd_, lines.data() + done, lines.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : 0;
      std::string reason =
          n < 0 ? errno_reason(path_, err) : path_.string() + ": write made no progress";
      // A torn line would weld itself to the next record written: the file goes back to its
      // last whole record, and the lines are written again whole once they can be.
      if (done > 0 && !regular_) {
        fail(reason + "; a partial record is left at its end");
        return false;
      }
      if (done > 0 && ::ftruncate(fd_, static_cast<off_t>(whole_bytes_)) != 0) {
        fail(reason + "; a partial record is left at its end (cutting it off: " +
             std::strerror(errno) + ")");
        return false;
      }
      fail(std::move(reason), err);
      return false;
    }
    done += static_cast<std::size_t>(n);
  }
  whole_bytes_ += lines.size();
  if (options_.sync == audit_sync_mode::every) {
    const int synced = options_.calls.fdatasync ? options_.calls.fdatasync(fd_) : ::fdatasync(fd_);
    if (synced != 0) {
      // Linux may drop what a failed sync did not write: whether the records are on the disk is
      // unknown, so none after them is claimed to be (the log fails for good).
      fail(errno_reason(path_, errno) + " (fdatasync; records written may not be on the disk)");
      return false;
    }
  } else if (sync_) {
    audit_sync_file::written(sync_);
  }
  return true;
}

bool audit_log::failed() const {
  return failed_.load(std::memory_order_acquire);
}

void audit_log::fail(std::string reason, int err) {
  if (!wants_room(err)) {
    lasting_ = true;
  } else if (!failed_.load(std::memory_order_relaxed)) {
    failed_at_ = std::chrono::steady_clock::now();
    retry_at_ = failed_at_ + retry_interval;
    log(spdlog::level::err, log_tag(session_id_),
        "audit log cannot be written ({}): new requests are refused until it can", reason);
  }
  failure_ = std::move(reason);
  failed_.store(true, std::memory_order_release);
}

std::string audit_log::failure() const {
  std::lock_guard lock(mutex_);
  return failure_;
}

}  // namespace broker::session
