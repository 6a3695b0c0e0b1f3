#include "session/audit_merge.hpp"

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

}  // namespace broker::session
