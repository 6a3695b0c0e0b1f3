// The per-session audit log (DESIGN §7): one JSONL file, one record per line, SHA-256 hash chain.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace broker::session {

class audit_key;

// Thread-safe append-only writer. Records are written with a single write(2) each, in seq
// order. The first write failure (or an open failure) puts the log in the failed state for
// good: the session then fails closed (DESIGN §7, 503 audit_unavailable).
class audit_log {
 public:
  // Opens (creating the directory and file, mode 0700/0600) <dir>/<session_id>.jsonl. Never
  // throws: on failure the returned log is failed() with the reason in failure(). An id that is
  // empty, "." or "..", or contains '/' is refused. When the file already holds records (a
  // reused session id) the chain continues from its last line's seq and hash; a file ending in a
  // partial line or an unreadable last record cannot be continued and the log is failed.
  static std::unique_ptr<audit_log> open(const std::filesystem::path& dir, std::string session_id);
  ~audit_log();
  audit_log(const audit_log&) = delete;
  audit_log& operator=(const audit_log&) = delete;

  // Adds "ts", "session", "seq" (in that order, first), then the caller's fields in their order,
  // then "prev" and "hash"; writes one line (reserved: those and "signature"). `fields` must be an object and must not contain those
  // keys (any that it does contain are dropped; a non-object adds nothing). Strings that are not
  // valid UTF-8 are written with U+FFFD in place of the bad bytes. Returns false (and the log is
  // failed from then on) if the line could not be written.
  bool write(const nlohmann::ordered_json& fields);

  // The session's last record (session_end): written as write() does, plus a "signature" field
  // (before "hash") over the chain head when a key was given (DESIGN §8.2).
  bool end(const nlohmann::ordered_json& fields);
  void sign_with(std::shared_ptr<const audit_key> key);
  // The file at path() is no longer the one being written (someone unlinked or renamed it).
  bool replaced() const;

  bool failed() const;
  std::string failure() const;  // human reason, e.g. "/x/s-1.jsonl: Permission denied"
  const std::filesystem::path& path() const { return path_; }
  const std::string& session_id() const { return session_id_; }

 private:
  audit_log(std::filesystem::path path, std::string session_id);
  bool append(const nlohmann::ordered_json& fields, bool sign);

  std::filesystem::path path_;
  std::string session_id_;
  mutable std::mutex mutex_;
  int fd_ = -1;
  std::uint64_t seq_ = 0;
  std::string prev_;  // hex hash of the previous record; 64 zeros at start
  std::string failure_;
  std::shared_ptr<const audit_key> key_;
};

// The `prev` of a log's first record.
inline constexpr std::string_view zero_hash =
    "0000000000000000000000000000000000000000000000000000000000000000";

// Lower-case hex of `size` bytes: how the log writes hashes, keys and signatures.
std::string lower_hex(const unsigned char* data, std::size_t size);

// SHA-256 hex of `data` (lower-case).
std::string sha256_hex(std::string_view data);

// The chain rule, shared by writer and verifier: hash = SHA-256(prev_hex + record_without_hash)
// where record_without_hash is the exact line text with its trailing `,"hash":"<hex>"` removed.
std::string chain_hash(std::string_view prev_hex, std::string_view record_without_hash);

}  // namespace broker::session
