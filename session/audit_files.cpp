#include "session/audit_files.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>
#include <set>
#include <system_error>

namespace broker::session {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view log_extension = ".jsonl";
constexpr std::size_t max_replica_name = 64;

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// Resuming reads the file backwards to its last line; a record is a few KiB at most, so a
// "line" longer than this means the file is not one of ours.
constexpr std::size_t max_resume_line = 16 * 1024 * 1024;

}  // namespace

std::string errno_reason(const fs::path& path, int err) {
  return path.string() + ": " + std::strerror(err);
}

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

std::optional<std::chrono::system_clock::time_point> first_record_time(const fs::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  char head[40] = {};
  const ssize_t n = ::pread(fd, head, sizeof head - 1, 0);
  ::close(fd);
  std::tm tm{};
  int millis = 0, used = 0;
  if (n <= 0 ||
      std::sscanf(head, "{\"ts\":\"%4d-%2d-%2dT%2d:%2d:%2d.%3dZ\"%n", &tm.tm_year, &tm.tm_mon,
                  &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &millis, &used) != 7 ||
      used == 0)
    return std::nullopt;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  const std::time_t secs = ::timegm(&tm);
  if (secs == static_cast<std::time_t>(-1)) return std::nullopt;
  return std::chrono::system_clock::from_time_t(secs) + std::chrono::milliseconds(millis);
}

bool valid_replica_name(std::string_view name) {
  if (name.empty() || name.size() > max_replica_name) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '.' ||
           c == '_' || c == '-';
  });
}

bool valid_session_name(std::string_view name) {
  return valid_replica_name(name) && name.front() != '.';
}

fs::path single_log_path(const fs::path& dir, std::string_view session) {
  return dir / (std::string(session) + std::string(log_extension));
}

fs::path generation_log_path(const fs::path& dir, std::string_view session,
                             std::string_view replica, std::uint64_t generation) {
  char number[24];
  std::snprintf(number, sizeof number, "%06llu", static_cast<unsigned long long>(generation));
  return dir / std::string(session) /
         (std::string(replica) + "." + number + std::string(log_extension));
}

std::optional<std::pair<std::string, std::uint64_t>> parse_generation_name(std::string_view name) {
  if (!name.ends_with(log_extension)) return std::nullopt;
  name.remove_suffix(log_extension.size());
  // The replica may hold dots itself: the generation is what follows the last one.
  const std::size_t dot = name.rfind('.');
  if (dot == std::string_view::npos) return std::nullopt;
  const std::string_view digits = name.substr(dot + 1);
  const std::string_view replica = name.substr(0, dot);
  // At least six digits and at most 19 (no overflow): only names the writer makes.
  if (digits.size() < 6 || digits.size() > 19 ||
      !std::all_of(digits.begin(), digits.end(), is_digit))
    return std::nullopt;
  if (!valid_replica_name(replica)) return std::nullopt;
  std::uint64_t generation = 0;
  for (char c : digits) generation = generation * 10 + static_cast<std::uint64_t>(c - '0');
  if (generation == 0) return std::nullopt;
  return std::pair{std::string(replica), generation};
}

std::vector<replica_files> session_files(const fs::path& dir, std::string_view session) {
  std::map<std::string, std::vector<audit_file>> by_replica;
  std::error_code ec;
  if (const fs::path single = single_log_path(dir, session); fs::is_regular_file(single, ec))
    by_replica[std::string(local_replica)].push_back({single, 0});
  for (fs::directory_iterator it(dir / std::string(session), ec), end; !ec && it != end;
       it.increment(ec)) {
    auto parsed = parse_generation_name(it->path().filename().string());
    std::error_code type_ec;
    if (!parsed || !it->is_regular_file(type_ec)) continue;
    by_replica[parsed->first].push_back({it->path(), parsed->second});
  }
  std::vector<replica_files> out;
  for (auto& [replica, files] : by_replica) {
    std::sort(files.begin(), files.end(),
              [](const auto& a, const auto& b) { return a.generation < b.generation; });
    out.push_back({replica, std::move(files)});
  }
  return out;
}

std::vector<std::string> session_ids(const fs::path& dir) {
  std::set<std::string> ids;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code type_ec;
    const std::string name = it->path().filename().string();
    if (it->is_regular_file(type_ec)) {
      if (name.size() > log_extension.size() && name.ends_with(log_extension))
        ids.insert(name.substr(0, name.size() - log_extension.size()));
    } else if (it->is_directory(type_ec)) {
      std::error_code inner_ec;
      for (fs::directory_iterator file(it->path(), inner_ec), last; !inner_ec && file != last;
           file.increment(inner_ec)) {
        std::error_code file_ec;
        if (parse_generation_name(file->path().filename().string()) &&
            file->is_regular_file(file_ec)) {
          ids.insert(name);
          break;
        }
      }
    }
  }
  return {ids.begin(), ids.end()};
}

}  // namespace broker::session
