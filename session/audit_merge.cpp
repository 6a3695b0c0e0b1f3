#include "session/audit_merge.hpp"

#include <algorithm>
#include <array>
#include <system_error>
#include <utility>

#include <nlohmann/json.hpp>

namespace broker::session {

bool replica_stream::open_current() {
  in_.close();
  in_.clear();
  in_.open(files_.files[index_].path, std::ios::binary);
  opened_ = in_.is_open();
  return opened_;
}

std::optional<std::string> replica_stream::next() {
  while (index_ < files_.files.size()) {
    if (!opened_ && !open_current()) {  // gone since it was listed: nothing to read there
      ++index_;
      continue;
    }
    std::string line;
    if (std::getline(in_, line)) {
      if (!in_.eof()) {
        line.insert(0, partial_);
        partial_.clear();
        return line;
      }
      partial_ += line;  // no newline yet
    }
    in_.clear();                                                 // at the end of the file, for now
    if (index_ + 1 >= files_.files.size()) return std::nullopt;  // the newest: more may come
    // The writer has moved on to a newer file, so this one is complete.
    ++index_;
    opened_ = false;
    if (!partial_.empty()) return std::exchange(partial_, {});
  }
  return std::nullopt;
}

merged_log::merged_log(std::vector<replica_files> replicas) {
  update(std::move(replicas));
}

void merged_log::update(std::vector<replica_files> replicas) {
  for (auto& files : replicas) {
    auto it = sources_.find(files.replica);
    if (it != sources_.end()) {
      it->second.stream.update(std::move(files));
    } else {
      std::string name = files.replica;
      sources_.emplace(std::move(name), source{replica_stream(std::move(files)), {}, {}, false});
    }
  }
}

void merged_log::fill(source& s) {
  auto line = s.stream.next();
  if (!line) return;
  head h;
  const auto record = nlohmann::json::parse(*line, nullptr, false);
  if (record.is_object()) {
    if (auto ts = record.find("ts"); ts != record.end() && ts->is_string())
      s.last_ts = ts->get<std::string>();
    auto event = record.find("event");
    h.session_end = event != record.end() && event->is_string() && *event == "session_end";
  }
  // A line without a ts (damage) sorts with the record before it in its replica.
  h.ts = s.last_ts;
  h.line = std::move(*line);
  s.next = std::move(h);
}

std::optional<std::string> merged_log::next() {
  source* best = nullptr;
  // sources_ is in replica-name order and only a strictly earlier ts displaces the first found:
  // equal ts go by replica name. A replica's own records come in its stream's (seq) order.
  for (auto& [name, s] : sources_) {
    if (!s.next) fill(s);
    if (!s.next) continue;
    if (best == nullptr || s.next->ts < best->next->ts) best = &s;
  }
  if (best == nullptr) return std::nullopt;
  best->ended = best->next->session_end;
  std::string line = std::move(best->next->line);
  best->next.reset();
  return line;
}

bool merged_log::ended() const {
  if (sources_.empty()) return false;
  for (const auto& [name, s] : sources_)
    if (!s.ended || s.next) return false;
  return true;
}

namespace {

// The record's ts, or `previous` for a line without one (damage sorts with the line before it).
std::string ts_of(const std::string& line, const std::string& previous) {
  const auto record = nlohmann::json::parse(line, nullptr, false);
  if (record.is_object())
    if (auto ts = record.find("ts"); ts != record.end() && ts->is_string())
      return ts->get<std::string>();
  return previous;
}

}  // namespace

std::uint64_t count_lines(const std::filesystem::path& file, std::uint64_t from) {
  std::uint64_t lines = 0;
  std::array<char, 1 << 16> chunk;
  std::ifstream in(file, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(from));
  while (in) {
    in.read(chunk.data(), chunk.size());
    lines += static_cast<std::uint64_t>(std::count(chunk.data(), chunk.data() + in.gcount(), '\n'));
  }
  return lines;
}

std::uint64_t count_lines(const replica_files& replica) {
  std::uint64_t lines = 0;
  for (const auto& file : replica.files) lines += count_lines(file.path);
  return lines;
}

std::vector<std::string> last_lines(const replica_files& replica, std::size_t count) {
  std::vector<std::string> newest;  // newest first
  constexpr std::uint64_t chunk_size = 1 << 16;
  for (auto file = replica.files.rbegin(); file != replica.files.rend() && newest.size() < count;
       ++file) {
    std::error_code ec;
    std::uint64_t pos = std::filesystem::file_size(file->path, ec);
    std::ifstream in(file->path, std::ios::binary);
    if (ec || !in) continue;
    std::string buffer;    // the bytes from pos not yet taken, up to the last newline
    bool trimmed = false;  // an unfinished last line has been left out
    for (;;) {
      // Lines end at the end of the buffer; the one before the last newline starts after the
      // newline before it, or at the start of the file.
      while (trimmed && newest.size() < count && !buffer.empty()) {
        const auto before =
            buffer.size() >= 2 ? buffer.rfind('\n', buffer.size() - 2) : std::string::npos;
        if (before == std::string::npos) {
          if (pos > 0) break;  // its start is further back
          newest.push_back(buffer.substr(0, buffer.size() - 1));
          buffer.clear();
          break;
        }
        newest.push_back(buffer.substr(before + 1, buffer.size() - before - 2));
        buffer.resize(before + 1);
      }
      if (pos == 0 || newest.size() >= count) break;
      const auto n = std::min(chunk_size, pos);
      pos -= n;
      std::string chunk(n, '\0');
      in.seekg(static_cast<std::streamoff>(pos));
      if (!in.read(chunk.data(), static_cast<std::streamsize>(n))) break;
      buffer.insert(0, chunk);
      if (!trimmed) {
        const auto last = buffer.rfind('\n');
        if (last == std::string::npos) continue;
        buffer.resize(last + 1);
        trimmed = true;
      }
    }
  }
  std::reverse(newest.begin(), newest.end());
  return newest;
}

std::vector<std::string> merged_tail(const std::vector<replica_files>& replicas,
                                     std::size_t count) {
  struct source {
    std::vector<std::string> lines;
    std::size_t next = 0;
    std::string ts;  // of lines[next]
    std::string last_ts;
  };
  // In the order given (session_files' replica-name order): the tie order, as merged_log's.
  std::vector<source> sources;
  for (const auto& replica : replicas) sources.push_back({last_lines(replica, count), 0, {}, {}});
  const auto fill = [](source& s) {
    if (s.next < s.lines.size()) s.ts = s.last_ts = ts_of(s.lines[s.next], s.last_ts);
  };
  for (auto& s : sources) fill(s);
  std::vector<std::string> merged;
  for (;;) {
    source* best = nullptr;
    for (auto& s : sources)
      if (s.next < s.lines.size() && (best == nullptr || s.ts < best->ts)) best = &s;
    if (best == nullptr) break;
    merged.push_back(std::move(best->lines[best->next++]));
    fill(*best);
  }
  if (merged.size() > count)
    merged.erase(merged.begin(), merged.end() - static_cast<std::ptrdiff_t>(count));
  return merged;
}

}  // namespace broker::session
