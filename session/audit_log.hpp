// The per-session audit log (docs/audit-log.md): JSONL, one record per line, one SHA-256 hash chain
// per writer, optionally rotated across files and written per gateway replica (audit_files.hpp).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include <sys/types.h>

#include <nlohmann/json.hpp>

#include "base/json_text.hpp"
#include "session/audit_sync.hpp"

namespace broker::session {

class audit_key;

// When a file is closed and the next generation begun; 0 is never. Rotation happens between
// records, at write time: before a record that would take a non-empty file past max_bytes (a
// record larger than that gets a file of its own), and before the first record written once the
// file's first record is max_age old.
struct audit_rotation {
  std::uint64_t max_bytes = 0;
  std::chrono::milliseconds max_age{0};
  bool enabled() const { return max_bytes > 0 || max_age.count() > 0; }
};

// The system calls a log makes on its file (a fake peer failing the Nth one reaches every error
// path). Empty: write(2) and fdatasync(2).
struct audit_file_calls {
  std::function<ssize_t(int fd, const char* data, std::size_t size)> write;
  sync_call fdatasync;
};

struct audit_log_options {
  audit_rotation rotation;
  std::string replica;  // a gateway replica's name ([A-Za-z0-9._-], 1..64); "" for none
  // Stamps each record's ts and measures a file's age (tests inject one); empty: system_clock.
  std::function<std::chrono::system_clock::time_point()> clock;
  // When records reach the disk (docs/audit-log.md): with a failed fdatasync they may not have, and
  // the log fails for good.
  audit_sync_mode sync = audit_sync_mode::batch;
  audit_file_calls calls;
};

// Thread-safe append-only writer. Records reach the file in seq order, each with a single
// write(2), or staged ones together with one (stage(), flush()). A write that fails for want of
// room (ENOSPC, EDQUOT) makes the log unavailable: what of the failed lines reached the file is cut
// off again, so that it still ends in a whole record, and they wait, chained, to be written again.
// Meanwhile the session fails closed (docs/audit-log.md, 503 audit_unavailable), and the log tries
// again at most every retry_interval (from available(), flush() and each record) or at once
// (end()); a file that could not be opened for want of room is opened by the next try. Any other
// failure puts the log in the failed state for good.
//
// Written records reach the disk by options.sync: with an fdatasync after each write, under the
// lock (every); by the process's syncing thread within batch_delay, off the request path, and at
// end() (batch); when the kernel writes them back (none). A failed fdatasync fails the log for
// good (from the next record or available(), in batch mode).
class audit_log {
 public:
  // Opens the session's log, creating directories (0700) and files (0600) as needed. Never
  // throws: on failure the returned log is failed() with the reason in failure(). An id that is
  // empty, "." or "..", or contains '/' is refused, and so is an invalid replica name.
  //
  // With neither rotation nor a replica the file is <dir>/<session_id>.jsonl, as it always was
  // (unless the session already has files of replica "local" in the rotated layout: then those
  // are continued). Otherwise the files are <dir>/<session_id>/<replica>.<generation>.jsonl,
  // replica "local" when none is named (audit_files.hpp).
  //
  // A reused session id (or a restarted replica) continues its chain from the last record of its
  // newest non-empty file, appending to the newest file; a first generation file continues the
  // session's single file, when there is one, for replica "local". A file ending in a partial
  // line or an unreadable last record cannot be continued and the log is failed.
  static std::unique_ptr<audit_log> open(const std::filesystem::path& dir, std::string session_id,
                                         audit_log_options options = {});
  ~audit_log();
  audit_log(const audit_log&) = delete;
  audit_log& operator=(const audit_log&) = delete;

  // Adds "ts", "session", "seq" (in that order, first), then the caller's fields in their order,
  // then "prev" and "hash"; writes one line (reserved: those and "signature"). `fields` must be an
  // object and must not contain those keys (any that it does contain are dropped; a non-object adds
  // nothing). Strings that are not valid UTF-8 are written with U+FFFD in place of the bad bytes.
  // Returns false if the line is not in the file: the log failed, or it is unavailable and the
  // record waits with the others (up to pending_limit bytes of them; past it, records are dropped
  // and counted in the operational log).
  bool write(const nlohmann::ordered_json& fields);
  // The same with the fields already serialized (the records written on every request). Their
  // keys must not be the reserved ones: these are not checked.
  bool write(const base::json_members& fields);
  // The same record, chained now but left staged: it reaches the file with the next flush() or
  // write(), in seq order, with whatever else is staged then (one write(2) for all). A caller
  // that stages flushes before the response the record describes completes (docs/audit-log.md):
  // HTTP/2 connections flush before each write to the client, so the records of the streams that
  // end together cost one write. Past staged_limit bytes staged, a record is written at once.
  bool stage(const base::json_members& fields);
  // Writes what is staged; false when it is not written.
  bool flush();
  static constexpr std::size_t staged_limit = 64 * 1024;
  // Records kept while the log is unavailable: those of exchanges already under way when it
  // failed (their requests went upstream), at most this many bytes of them.
  static constexpr std::size_t pending_limit = 1024 * 1024;
  static constexpr std::chrono::milliseconds retry_interval{200};

  // The session's last record (session_end): written as write() does, plus a "signature" field
  // (before "hash") over the chain head when a key was given (docs/audit-log.md). An unavailable
  // log is tried again at once for it. In batch mode the file is synced before it returns.
  bool end(const nlohmann::ordered_json& fields);
  void sign_with(std::shared_ptr<const audit_key> key);

  // Called with each record's line (no newline) once it is written, in seq order, under the
  // writer's lock (so a sink must be quick and must not write to this log). A sink cannot fail
  // the log: whatever it throws is dropped. Replaces any earlier sink; an empty one removes it.
  void set_sink(std::function<void(std::string_view line)> sink);

  // The file at path() is no longer the one being written (someone unlinked or renamed it).
  bool replaced() const;

  // Whether a new request may be let through: false while failed, after trying an unavailable
  // log again when retry_interval has passed since the last try. Lock-free while the log is well.
  bool available();
  // The log cannot take records now (unavailable or failed for good).
  bool failed() const;
  std::string failure() const;  // human reason, e.g. "/x/s-1.jsonl: Permission denied"
  // The file being written (it changes when the log rotates).
  std::filesystem::path path() const;
  const std::string& session_id() const { return session_id_; }

 private:
  audit_log(std::filesystem::path dir, std::string session_id, audit_log_options options);
  bool append_fields(const nlohmann::ordered_json& fields, bool sign);
  // `members`: the record's fields, serialized, reserved keys left out (member_text).
  bool append(std::string_view members, bool sign, bool staged = false);
  // Under mutex_: puts the record's line in staged_ and writes staged_ unless `staged`; false
  // when the line is not written.
  bool add_line(std::string_view members, bool sign, bool staged);
  // Writes staged_ and tells the sink of each line in it; false (staged_ kept) when it could not
  // be written. Under mutex_.
  bool flush_staged();
  // The record as its line: stamped, numbered, chained to the last (and signed with `sign`),
  // with its hash in `hash`: the chain moves on to it once the caller sets prev_ to that. Throws
  // when the fields cannot be serialized. `members`: the caller's fields, serialized.
  std::string chained_line(std::string_view members, bool sign,
                           std::chrono::system_clock::time_point now, std::string& hash) const;
  // Puts the log in the failed state with `reason`: until it can be written again when `err` is
  // a want of room (ENOSPC, EDQUOT), for good otherwise. Under mutex_ (or before sharing).
  void fail(std::string reason, int err = 0);
  // Under mutex_: whether records can be written now. A failed batch sync fails the log here;
  // an unavailable log is tried again, `at_once` or once retry_interval has passed since the
  // last try.
  bool ready(bool at_once);
  // Under mutex_: opens the files if they were not and writes what waited; the log is available
  // again when that succeeded.
  bool recover();
  // Appends `lines` (whole records) to the file. On a failure, what of them reached it is cut
  // off again and the log fails (false).
  bool write_whole(const std::string& lines);
  void open_files();
  bool resume_chain(const std::filesystem::path& file, std::uint64_t size);
  // Before a record of `record_bytes`: begins the next generation when due. A failure leaves
  // the record to the current file (the log failed, or unavailable until the next try).
  void rotate_if_due(std::size_t record_bytes, std::chrono::system_clock::time_point now);

  std::filesystem::path dir_;
  std::string session_id_;
  audit_log_options options_;
  mutable std::mutex mutex_;
  std::filesystem::path path_;
  int fd_ = -1;
  bool regular_ = false;                   // fd_ is a regular file (it can be cut back)
  std::shared_ptr<audit_sync_file> sync_;  // batch mode: what the shared syncer syncs
  // The file's generation in the rotated layout; 0 in the single-file one (never rotated).
  std::uint64_t generation_ = 0;
  std::uint64_t file_bytes_ = 0;   // the file's size with what is staged for it
  std::uint64_t whole_bytes_ = 0;  // the file's size up to the end of its last record
  // The ts of the file's first record; none while the file is empty.
  std::optional<std::chrono::system_clock::time_point> file_started_;
  std::uint64_t seq_ = 0;
  std::string prev_;                     // hex hash of the previous record; 64 zeros at start
  std::string staged_;                   // chained lines not yet written, each with its newline
  std::atomic<bool> has_staged_{false};  // staged_ is not empty: read without the lock
  std::string failure_;
  std::atomic<bool> failed_{false};  // failure_ is set: read without the lock on every request
  bool lasting_ = false;             // failed for good
  std::chrono::steady_clock::time_point failed_at_;  // when it became unavailable
  std::chrono::steady_clock::time_point retry_at_;   // not tried again before
  std::uint64_t dropped_ = 0;                        // records refused while unavailable
  std::string session_json_;                         // the session id as a JSON string
  std::shared_ptr<const audit_key> key_;
  std::function<void(std::string_view)> sink_;
};

// The `prev` of a log's first record.
inline constexpr std::string_view zero_hash =
    "0000000000000000000000000000000000000000000000000000000000000000";

// The chain rule, shared by writer and verifier: hash = SHA-256(prev_hex + record_without_hash)
// where record_without_hash is the exact line text with its trailing `,"hash":"<hex>"` removed.
std::string chain_hash(std::string_view prev_hex, std::string_view record_without_hash);

}  // namespace broker::session
