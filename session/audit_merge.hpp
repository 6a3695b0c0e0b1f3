// Reading one session's records in order across its files and replicas (`broker log SESSION`):
// each replica's files are one stream in generation order, and the replicas' streams are merged
// by ts (ties: replica name; within a replica, seq), never reordering a replica's own records.
#pragma once

#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "session/audit_files.hpp"

namespace broker::session {

// One replica's lines, file after file. Only complete lines come out: a last line still without
// its newline waits for the rest (the writer may be mid-record), unless a newer file exists (the
// writer moved on, so the line is all there will ever be).
class replica_stream {
 public:
  explicit replica_stream(replica_files files) : files_(std::move(files)) {}

  // A newer listing of the same replica: generations that appeared since are read after the
  // current file is finished.
  void update(replica_files files) { files_ = std::move(files); }

  // The next line available now (without its newline); nullopt when there is none yet.
  std::optional<std::string> next();

  const std::string& replica() const { return files_.replica; }

 private:
  bool open_current();

  replica_files files_;
  std::size_t index_ = 0;  // into files_.files
  bool opened_ = false;
  std::ifstream in_;
  std::string partial_;
};

// The merge of a session's replica streams.
class merged_log {
 public:
  explicit merged_log(std::vector<replica_files> replicas);

  // A newer listing of the session (follow): new generations and new replicas join.
  void update(std::vector<replica_files> replicas);

  // The next line in merged order among those available now; nullopt when none is. Lines that
  // are not JSON keep their place in their replica's stream.
  std::optional<std::string> next();

  // Every replica's last line so far was a session_end (and there is at least one replica).
  bool ended() const;

 private:
  struct head {
    std::string line;
    std::string ts;
    bool session_end = false;
  };
  struct source {
    replica_stream stream;
    std::optional<head> next;
    std::string last_ts;  // for lines without a ts of their own
    bool ended = false;   // the last line taken was a session_end
  };
  static void fill(source& s);
  std::map<std::string, source> sources_;  // by replica name: the tie order
};

// Reading a long session a page at a time (the console's timeline): the whole session is not
// read to show its end.
//
// How many complete lines a replica's files hold: what replica_stream gives, but for a
// non-newest file's unfinished last line (damage), which is not counted.
std::uint64_t count_lines(const replica_files& replica);
// The newlines in `file` from byte `from` on (to count only what a file gained).
std::uint64_t count_lines(const std::filesystem::path& file, std::uint64_t from = 0);
// The last `count` complete lines of a replica, oldest first, read from the ends of its newest
// files: the cost is that of those lines, not of the replica.
std::vector<std::string> last_lines(const replica_files& replica, std::size_t count);
// The last `count` lines of the merge of `replicas`, in merged_log's order, oldest first. Exact
// when each replica's records are in ts order (a replica stamps them in the order it chains
// them): the merge's last `count` lines are among each replica's last `count`.
std::vector<std::string> merged_tail(const std::vector<replica_files>& replicas, std::size_t count);

}  // namespace broker::session
