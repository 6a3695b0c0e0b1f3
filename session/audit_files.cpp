#include "session/audit_files.hpp"

#include <algorithm>
#include <cstdio>
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

}  // namespace

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
