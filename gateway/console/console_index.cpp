#include "gateway/console/console_index.hpp"

#include <algorithm>
#include <fstream>
#include <system_error>

#include <nlohmann/json.hpp>

#include "session/audit_files.hpp"
#include "session/log_reader.hpp"

namespace broker::gateway {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// A record that is one request, tunnel or refusal (an ask's held record is not: the request's
// own record follows it).
bool is_exchange(const std::string& event) {
  return event == "request" || event == "tunnel" || event == "refused" ||
         event == "exfiltration_blocked";
}

std::uint64_t count_of(const json& record, const char* key) {
  const auto n = session::integer_field(record, key);
  return n && *n > 0 ? static_cast<std::uint64_t>(*n) : 0;
}

bool contains(const std::string& text, const std::string& part) {
  return part.empty() || text.find(part) != std::string::npos;
}

}  // namespace

console_index::console_index(std::filesystem::path dir, std::size_t max_refusals)
    : dir_(std::move(dir)), max_refusals_(std::max<std::size_t>(1, max_refusals)) {}

void console_index::scan(const std::atomic<bool>* stop) {
  const auto stopped = [stop] { return stop && stop->load(std::memory_order_relaxed); };
  const auto started = std::chrono::steady_clock::now();
  std::error_code ec;
  std::vector<std::pair<fs::path, file_state>> found;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    std::error_code type_ec;
    const auto name = entry.path().filename().string();
    if (entry.is_regular_file(type_ec) && name.ends_with(".jsonl")) {
      const auto session = name.substr(0, name.size() - 6);
      if (session::valid_session_name(session) && !files_.contains(entry.path()))
        found.push_back({entry.path(), {session, std::string(session::local_replica), 0}});
    } else if (entry.is_directory(type_ec) && session::valid_session_name(name)) {
      // A directory gains a file when a replica starts writing there or rotates: listed again
      // only then (its files' growth is seen below).
      const auto changed = fs::last_write_time(entry.path(), type_ec);
      auto& seen = directories_[entry.path()];
      if (!type_ec && seen == changed) continue;
      seen = changed;
      for (const auto& file : fs::directory_iterator(entry.path(), type_ec)) {
        const auto generation = session::parse_generation_name(file.path().filename().string());
        if (generation && !files_.contains(file.path()))
          found.push_back({file.path(), {name, generation->first, 0}});
      }
    }
  }
  for (auto& [path, state] : found) files_.emplace(path, std::move(state));
  // In path order: a replica's generations oldest first, so that its records are taken in order.
  for (auto& [path, state] : files_) {
    if (stopped()) return;
    read_new(path, state, stop);
  }
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  std::lock_guard lock(mutex_);
  stats_.files = files_.size();
  stats_.sessions = sessions_.size();
  stats_.last_scan_ms = ms;
  stats_.scanned = true;
}

void console_index::read_new(const fs::path& path, file_state& state,
                             const std::atomic<bool>* stop) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec || size <= state.offset) return;
  std::ifstream in(path, std::ios::binary);
  if (!in) return;
  in.seekg(static_cast<std::streamoff>(state.offset));
  std::string bytes(size - state.offset, '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  bytes.resize(static_cast<std::size_t>(in.gcount()));
  // Complete lines only: a writer may be in the middle of the last one.
  const auto end = bytes.rfind('\n');
  if (end == std::string::npos) return;
  std::size_t start = 0;
  while (start <= end) {
    if (stop && stop->load(std::memory_order_relaxed)) break;
    const auto newline = bytes.find('\n', start);
    take(bytes.substr(start, newline - start), state);
    start = newline + 1;
  }
  state.offset += start;  // end + 1 unless stopped
}

void console_index::take(const std::string& line, const file_state& state) {
  const json record = json::parse(line, nullptr, false);
  std::lock_guard lock(mutex_);
  ++stats_.records;
  if (!record.is_object()) return;
  const auto event = session::string_field(record, "event");
  auto& usage = sessions_[state.session];
  const auto ts = session::string_field(record, "ts");
  if (ts > usage.last_ts) usage.last_ts = ts;
  if (event == "session_start") {
    if (auto user = session::string_field(record, "user"); !user.empty()) usage.user = user;
    return;
  }
  if (!is_exchange(event)) return;
  const auto decision = session::string_field(record, "decision");
  ++usage.requests;
  usage.bytes_out += count_of(record, "bytes_out");
  usage.bytes_in += count_of(record, "bytes_in");
  const auto tokens = count_of(record, "llm_tokens");
  double cost = 0;
  if (const auto* c = session::field(record, "cost_usd"); c && c->is_number())
    cost = std::max(0.0, c->get<double>());
  usage.llm_tokens += tokens;
  usage.cost_usd += cost;
  if (tokens > 0 || cost > 0) {
    auto& cell = spend_[ts.substr(0, 10)][state.session];
    ++cell.requests;
    cell.llm_tokens += tokens;
    cell.cost_usd += cost;
  }
  if (decision != "deny") return;
  ++usage.denied;
  refusal_row row;
  row.ts = ts;
  row.session = state.session;
  row.replica = state.replica;
  row.seq = count_of(record, "seq");
  row.code = session::string_field(record, "error");
  row.method = session::string_field(record, "method");
  row.host = session::string_field(record, "host");
  row.path = session::string_field(record, "path");
  row.status = static_cast<int>(session::integer_field(record, "status").value_or(0));
  row.rule = session::string_field(record, "rule");
  if (refusals_.size() < max_refusals_) {
    refusals_.push_back(std::move(row));
  } else {
    refusals_[next_refusal_] = std::move(row);
    next_refusal_ = (next_refusal_ + 1) % max_refusals_;
  }
}

std::optional<session_usage> console_index::usage(const std::string& session) const {
  std::lock_guard lock(mutex_);
  const auto it = sessions_.find(session);
  if (it == sessions_.end()) return std::nullopt;
  return it->second;
}

std::vector<refusal_row> console_index::refusals(const refusal_filter& filter, std::size_t offset,
                                                 std::size_t limit, std::size_t& total) const {
  std::vector<const refusal_row*> matching;
  std::lock_guard lock(mutex_);
  for (const auto& row : refusals_)
    if ((filter.code.empty() || row.code == filter.code) &&
        (filter.session.empty() || row.session == filter.session) &&
        contains(row.host, filter.host))
      matching.push_back(&row);
  // Newest first; files are read one after another, so the ring is not in time order.
  std::sort(matching.begin(), matching.end(), [](const auto* a, const auto* b) {
    return a->ts != b->ts ? a->ts > b->ts : a->seq > b->seq;
  });
  total = matching.size();
  std::vector<refusal_row> out;
  for (std::size_t i = offset; i < matching.size() && out.size() < limit; ++i)
    out.push_back(*matching[i]);
  return out;
}

spend_table console_index::spend(const std::string& since) const {
  std::lock_guard lock(mutex_);
  return spend_table(spend_.lower_bound(since), spend_.end());
}

std::map<std::string, std::string> console_index::users() const {
  std::map<std::string, std::string> out;
  std::lock_guard lock(mutex_);
  for (const auto& [id, usage] : sessions_)
    if (!usage.user.empty()) out.emplace(id, usage.user);
  return out;
}

console_index::stats console_index::statistics() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

console_scanner::console_scanner(std::shared_ptr<console_index> index,
                                 std::chrono::milliseconds every,
                                 std::chrono::milliseconds idle_after)
    : index_(std::move(index)), every_(every), idle_after_(idle_after) {
  thread_ = std::thread([this] { run(); });
}

console_scanner::~console_scanner() {
  stopping_ = true;  // a scan under way ends at its next record
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void console_scanner::wanted() {
  {
    std::lock_guard lock(mutex_);
    wanted_at_ = std::chrono::steady_clock::now();
  }
  wake_.notify_all();
}

void console_scanner::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    // Asleep until someone looks; then a scan every `every_` while they do.
    wake_.wait(lock, [this] {
      return stop_ || (wanted_at_ != std::chrono::steady_clock::time_point{} &&
                       std::chrono::steady_clock::now() - wanted_at_ < idle_after_);
    });
    if (stop_) return;
    lock.unlock();
    try {
      index_->scan(&stopping_);
    } catch (const std::exception&) {
      // A file that vanished mid-read: the next scan sees the directory as it is then.
    }
    lock.lock();
    if (wake_.wait_for(lock, every_, [this] { return stop_; })) return;
  }
}

}  // namespace broker::gateway
