#include "session/log_reader.hpp"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string_view>
#include <system_error>

#include <openssl/rand.h>

#include "base/text.hpp"
#include "session/audit_files.hpp"
#include "session/audit_key.hpp"
#include "session/audit_log.hpp"

namespace broker::session {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr std::string_view hash_key = ",\"hash\":\"";
constexpr std::size_t hash_suffix_size = hash_key.size() + 64 + 2;  // ,"hash":"<64>"}

// Log text goes to a terminal: control bytes from a hostile path or host (ESC sequences) are
// shown as \xNN instead of being interpreted.
using base::printable;

std::string scalar_text(const json& value) {
  if (value.is_string()) return printable(value.get<std::string>());
  if (value.is_number() || value.is_boolean()) return value.dump();
  return "?";
}

// scheme://host[:port]path, the port shown only when it is not the scheme's default; without a
// scheme (a tunnel) just host:port.
std::string target_text(const json& record) {
  std::string host = string_field(record, "host");
  if (host.empty()) return {};
  if (host.find(':') != std::string::npos && host.front() != '[') host = "[" + host + "]";
  std::string scheme = string_field(record, "scheme");
  auto port = integer_field(record, "port");
  std::string out;
  if (!scheme.empty()) out = scheme + "://";
  out += host;
  bool default_port = (port == 80 && (scheme == "http" || scheme == "ws")) ||
                      (port == 443 && (scheme == "https" || scheme == "wss"));
  if (port && !default_port) out += ":" + std::to_string(*port);
  if (!scheme.empty()) out += string_field(record, "path");
  return printable(out);
}

constexpr std::string_view signature_key = ",\"signature\":{";

// A record's "signature" (the field before "hash"): does it sign the chain head the record would
// have had without it? `without_hash` is the record text with its hash removed.
bool signature_holds(const json& record, std::string_view without_hash,
                     std::string_view previous_hash, std::string* signer) {
  const json* signature = field(record, "signature");
  const std::size_t at = without_hash.rfind(signature_key);
  if (signature == nullptr || !signature->is_object() || at == std::string_view::npos ||
      string_field(*signature, "alg") != "ed25519")
    return false;
  const std::string head = chain_hash(previous_hash, std::string(without_hash.substr(0, at)) + "}");
  *signer = string_field(*signature, "key");
  return head_signature_valid(*signer, head, string_field(*signature, "sig"));
}

void append(std::string& out, const std::string& part) {
  if (part.empty()) return;
  if (!out.empty()) out += "  ";
  out += part;
}

// One chain, checked a line at a time across as many files as it spans.
class chain_checker {
 public:
  // Why `line` does not continue the chain; nullopt when it does (and it is now the head).
  std::optional<std::string> check(const std::string& line) {
    if (line.empty()) return "empty line";
    if (line.size() <= hash_suffix_size ||
        line.compare(line.size() - hash_suffix_size, hash_key.size(), hash_key) != 0 ||
        line.compare(line.size() - 2, 2, "\"}") != 0 ||
        !base::is_lower_hex(std::string_view(line).substr(line.size() - 66, 64), 64)) {
      return "record does not end with a \"hash\" field";
    }
    json record = json::parse(line, nullptr, false);
    if (!record.is_object()) return "record is not a JSON object";

    auto seq = integer_field(record, "seq");
    auto expected = static_cast<long long>(records + 1);
    if (!seq) return "record has no integer \"seq\"";
    if (*seq != expected) {
      return "seq " + std::to_string(*seq) + " where " + std::to_string(expected) +
             " was expected (record missing, reordered or inserted)";
    }
    if (string_field(record, "prev") != previous_hash_) {
      return records == 0 ? "first record's \"prev\" is not all zeros"
                          : "\"prev\" does not match the previous record's hash";
    }
    std::string stated = line.substr(line.size() - 66, 64);
    std::string without_hash = line.substr(0, line.size() - hash_suffix_size) + "}";
    if (chain_hash(previous_hash_, without_hash) != stated)
      return "hash mismatch (the record or its hash was altered)";
    const bool has_signature = field(record, "signature") != nullptr;
    std::string key;
    if (has_signature && !signature_holds(record, without_hash, previous_hash_, &key))
      return "the signature does not match the chain head (records were altered, removed or "
             "re-chained)";
    previous_hash_ = std::move(stated);
    last_is_end = string_field(record, "event") == "session_end";
    signer = has_signature ? key : std::string();
    ++records;
    return std::nullopt;
  }

  std::size_t records = 0;
  bool last_is_end = false;
  std::string signer;

 private:
  std::string previous_hash_{zero_hash};
};

// Checks every line of `in` against `chain`; on the first bad one fills result's bad_line and
// error and returns false.
bool check_stream(std::istream& in, chain_checker& chain, verify_result& result,
                  const std::atomic<bool>* stop = nullptr) {
  std::size_t line_number = 0;
  std::string line;
  while (std::getline(in, line)) {
    ++line_number;
    if (stop && stop->load(std::memory_order_relaxed)) {
      result.bad_line = line_number;
      result.error = "stopped before the end";
      return false;
    }
    // getline stopping at EOF instead of '\n' means the writer never finished this record.
    if (in.eof()) {
      result.bad_line = line_number;
      result.truncated = true;
      result.error =
          "the last record is partial (no newline at the end of the file: its write "
          "was cut short)";
      return false;
    }
    if (auto error = chain.check(line)) {
      result.bad_line = line_number;
      result.error = std::move(*error);
      return false;
    }
  }
  if (in.bad()) {
    result.bad_line = line_number;
    result.error = "read error";
    return false;
  }
  return true;
}

verify_result finish(const chain_checker& chain, verify_result result, bool ok) {
  result.records = chain.records;
  result.has_end = chain.last_is_end;
  result.signer = chain.signer;
  if (ok && chain.records == 0) {
    result.error = "empty log";
    ok = false;
  }
  result.ok = ok;
  return result;
}

}  // namespace

const nlohmann::json* field(const nlohmann::json& record, const char* key) {
  if (!record.is_object()) return nullptr;
  auto it = record.find(key);
  return it == record.end() || it->is_null() ? nullptr : &*it;
}

std::string string_field(const nlohmann::json& record, const char* key) {
  const json* value = field(record, key);
  return value != nullptr && value->is_string() ? value->get<std::string>() : std::string();
}

std::optional<long long> integer_field(const nlohmann::json& record, const char* key) {
  const json* value = field(record, key);
  if (value == nullptr) return std::nullopt;
  if (value->is_number_unsigned()) {
    auto v = value->get<std::uint64_t>();
    if (v > static_cast<std::uint64_t>(LLONG_MAX)) return std::nullopt;
    return static_cast<long long>(v);
  }
  if (value->is_number_integer()) return value->get<long long>();
  return std::nullopt;
}

verify_result verify_log(std::istream& in) {
  chain_checker chain;
  verify_result result;
  const bool ok = check_stream(in, chain, result);
  return finish(chain, std::move(result), ok);
}

verify_result verify_replica(const replica_files& replica, const std::atomic<bool>* stop) {
  chain_checker chain;
  verify_result result;
  result.files = replica.files.size();
  auto fail = [&](const fs::path& file, std::size_t line, std::string error) {
    result.bad_file = file;
    result.bad_line = line;
    result.error = std::move(error);
    return finish(chain, std::move(result), false);
  };
  for (std::size_t i = 0; i < replica.files.size(); ++i) {
    const audit_file& file = replica.files[i];
    // Generations are consecutive from 1 (after the single file, generation 0, if any): a gap
    // is a removed file, named here rather than as a seq jump in the file after it.
    const std::uint64_t expected =
        i == 0 ? (file.generation == 0 ? 0 : 1) : replica.files[i - 1].generation + 1;
    if (file.generation > expected) {
      const fs::path missing = file.path.parent_path() /
                               generation_log_path({}, "", replica.replica, expected).filename();
      return fail(missing, 0,
                  "file missing (generation " + std::to_string(expected) + " of replica " +
                      replica.replica + " is not there: removed or renamed)");
    }
    std::ifstream in(file.path, std::ios::binary);
    if (!in) return fail(file.path, 0, "cannot read the file");
    const std::size_t before = chain.records;
    const bool last = i + 1 == replica.files.size();
    if (!check_stream(in, chain, result, stop)) {
      if (result.truncated && !last) {
        result.truncated = false;
        result.error += ", and a newer file follows it (records removed after the cut)";
      }
      if (!result.truncated && i > 0 && result.bad_line == 1 && chain.records == before)
        result.error += "; the first record of this file does not follow the last one of " +
                        replica.files[i - 1].path.filename().string() +
                        " (records removed there: truncated, or a file removed)";
      return fail(file.path, result.bad_line, result.error);
    }
    if (!last && chain.records == before)
      return fail(file.path, 0, "empty file before the newest one (its records were removed)");
  }
  return finish(chain, std::move(result), true);
}

std::string format_record(const nlohmann::json& record) {
  std::string ts = string_field(record, "ts");
  auto t = ts.find('T');
  std::string out = t == std::string::npos ? "??:??:??.???" : printable(ts.substr(t + 1, 12));

  std::string event = string_field(record, "event");
  std::string shown = event.empty() ? "?" : printable(event);
  if (shown.size() < 7) shown.resize(7, ' ');  // aligns the request/tunnel/refused columns
  out += "  " + shown;

  if (event == "session_start" || event == "policy_reload") {  // serve reloads on SIGHUP
    if (const json* v = field(record, "version")) append(out, "version " + scalar_text(*v));
    if (const json* v = field(record, "listen")) append(out, "listen " + scalar_text(*v));
    if (const json* policy = field(record, "policy"); policy != nullptr && policy->is_array()) {
      std::string sources;
      for (const auto& layer : *policy) {
        std::string source = string_field(layer, "source");
        if (!sources.empty()) sources += ", ";
        sources += source.empty() ? "?" : printable(source);
      }
      append(out, "policy " + (sources.empty() ? std::string("(default)") : sources));
    }
    return out;
  }
  if (event == "session_end") {
    for (const char* key : {"requests", "denied"}) {
      if (const json* v = field(record, key)) append(out, std::string(key) + "=" + scalar_text(*v));
    }
    // Only a session with an audit-only layer has would-deny records: shown when there were.
    if (auto n = integer_field(record, "would_deny"); n && *n > 0)
      append(out, "would_deny=" + std::to_string(*n));
    const json* exit = field(record, "exit");
    append(out, "exit=" + (exit != nullptr ? scalar_text(*exit) : std::string("-")));
    return out;
  }

  append(out, printable(string_field(record, "decision")));
  std::string request = printable(string_field(record, "method"));
  std::string target = target_text(record);
  if (!request.empty() && !target.empty()) request += " ";
  append(out, request + target);
  if (const json* status = field(record, "status")) append(out, scalar_text(*status));
  const json* bytes_out = field(record, "bytes_out");
  const json* bytes_in = field(record, "bytes_in");
  if (bytes_out != nullptr || bytes_in != nullptr) {
    append(out, (bytes_out ? scalar_text(*bytes_out) : "-") + "B> " +
                    (bytes_in ? scalar_text(*bytes_in) : "-") + "B<");
  }
  if (const json* ms = field(record, "ms"); ms != nullptr && ms->is_number()) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1fms", ms->get<double>());
    append(out, buf);
  }
  // An MCP call (docs/policy.md): its method and what it names.
  if (const json* mcp = field(record, "mcp"); mcp != nullptr && mcp->is_object()) {
    std::string call = "mcp " + printable(string_field(*mcp, "method"));
    for (const char* key : {"tool", "resource", "prompt"})
      if (auto name = string_field(*mcp, key); !name.empty()) call += " " + printable(name);
    append(out, call);
    if (auto outcome = string_field(*mcp, "outcome"); !outcome.empty()) {
      std::string shown = "outcome=" + printable(outcome);
      if (auto code = integer_field(*mcp, "error_code"))
        shown += " (" + std::to_string(*code) + ")";
      append(out, shown);
    }
    if (auto n = integer_field(*mcp, "tools_hidden"); n && *n > 0)
      append(out, "tools_hidden=" + std::to_string(*n));
    // Tools that changed since the session pinned them: which, and how.
    if (const json* changed = field(*mcp, "tools_changed"); changed && changed->is_array()) {
      std::string list;
      for (const auto& t : *changed)
        if (t.is_string()) list += (list.empty() ? "" : "; ") + printable(t.get<std::string>());
      if (!list.empty()) append(out, "tools_changed=" + list);
    }
  }
  // An ask and its decision (docs/policy.md): which one, the scope and who decided; an MCP
  // call's decision names the call.
  if (event == "approval")
    if (auto call = string_field(record, "call"); !call.empty())
      append(out, "mcp " + printable(call));
  for (const char* key : {"rule", "allowed_by", "credential", "error", "id", "scope", "who"}) {
    if (const json* v = field(record, key)) append(out, std::string(key) + "=" + scalar_text(*v));
  }
  // The gateway's admin side (docs/gateway.md): a refused admin request, a token made or revoked.
  if (event == "admin")
    for (const char* key : {"path", "peer", "reason", "token", "name"})
      if (const json* v = field(record, key)) append(out, std::string(key) + "=" + scalar_text(*v));
  return out;
}

namespace {

// Adds one file's records to `summary`, in the order a single writer wrote them.
void add_records(session_summary& summary, std::istream& in) {
  std::string line;
  while (std::getline(in, line)) {
    json record = json::parse(line, nullptr, false);
    if (!record.is_object()) continue;  // garbage or a half-written last line
    std::string event = string_field(record, "event");
    if (event == "session_start" || event == "policy_reload") {  // serve reloads on SIGHUP
      if (summary.start.empty()) summary.start = string_field(record, "ts");
      // A resumed session is running again until its next session_end.
      summary.end.clear();
      summary.exit_code.reset();
    } else if (event == "session_end") {
      summary.end = string_field(record, "ts");
      auto exit = integer_field(record, "exit");
      if (exit && *exit >= INT_MIN && *exit <= INT_MAX) {
        summary.exit_code = static_cast<int>(*exit);
      } else {
        summary.exit_code.reset();
      }
      if (const json* usage = field(record, "usage"); usage && usage->is_object()) {
        if (const json* cost = field(*usage, "cost_usd"); cost && cost->is_number())
          summary.cost_usd = cost->get<double>();
      }
    } else if (event == "request" || event == "tunnel" || event == "refused") {
      ++summary.requests;
      const std::string decision = string_field(record, "decision");
      if (decision == "would_deny")
        ++summary.would_deny;
      else if (decision != "allow")
        ++summary.denied;
      for (const char* key : {"bytes_out", "bytes_in"})
        if (auto n = integer_field(record, key); n && *n > 0) summary.bytes += *n;
      if (auto n = integer_field(record, "llm_tokens"); n && *n > 0) summary.llm_tokens += *n;
    }
  }
}

}  // namespace

session_summary summarize_log(const std::filesystem::path& file) {
  session_summary summary;
  summary.id = file.stem().string();
  std::ifstream in(file);
  add_records(summary, in);
  return summary;
}

session_summary summarize_session(const std::filesystem::path& dir, const std::string& id) {
  session_summary summary;
  summary.id = id;
  bool all_ended = true;
  for (const auto& replica : session_files(dir, id)) {
    session_summary one;
    for (const auto& file : replica.files) {
      std::ifstream in(file.path);
      add_records(one, in);
    }
    if (!one.start.empty() && (summary.start.empty() || one.start < summary.start))
      summary.start = one.start;
    if (one.end.empty()) all_ended = false;
    if (!one.end.empty() && one.end >= summary.end) {
      summary.end = one.end;
      summary.exit_code = one.exit_code;
    }
    summary.requests += one.requests;
    summary.denied += one.denied;
    summary.would_deny += one.would_deny;
    summary.bytes += one.bytes;
    summary.llm_tokens += one.llm_tokens;
    if (one.cost_usd) summary.cost_usd = summary.cost_usd.value_or(0) + *one.cost_usd;
  }
  if (!all_ended) {
    summary.end.clear();
    summary.exit_code.reset();
  }
  return summary;
}

std::vector<session_summary> list_sessions(const std::filesystem::path& dir) {
  std::vector<session_summary> sessions;
  for (const auto& id : session_ids(dir)) sessions.push_back(summarize_session(dir, id));
  // ISO 8601 UTC timestamps sort as strings; the id breaks ties so the order is stable.
  std::sort(sessions.begin(), sessions.end(), [](const auto& a, const auto& b) {
    return a.start != b.start ? a.start < b.start : a.id < b.id;
  });
  return sessions;
}

std::filesystem::path default_log_dir() {
  // XDG Base Directory spec: a relative $XDG_STATE_HOME is invalid and must be ignored.
  const char* state = std::getenv("XDG_STATE_HOME");
  if (state != nullptr && state[0] == '/') return fs::path(state) / "broker" / "sessions";
  const char* home = std::getenv("HOME");
  if (home != nullptr && home[0] == '/') {
    return fs::path(home) / ".local" / "state" / "broker" / "sessions";
  }
  return {};
}

std::optional<log_selection> find_log(const std::filesystem::path& dir, const std::string& arg) {
  std::error_code ec;
  if (arg.empty()) {
    auto sessions = list_sessions(dir);
    if (sessions.empty()) return std::nullopt;
    return log_selection{sessions.back().id, session_files(dir, sessions.back().id)};
  }
  // A bare id is looked up in the log dir first, so a stray file of that name in the current
  // directory does not shadow the session; anything with a '/' is only ever a path.
  bool could_be_id = arg.find('/') == std::string::npos && arg != "." && arg != "..";
  if (could_be_id) {
    auto files = session_files(dir, arg);
    if (!files.empty()) return log_selection{arg, std::move(files)};
  }
  fs::path as_path(arg);
  if (fs::exists(as_path, ec) && !fs::is_directory(as_path, ec))
    return log_selection{"", {replica_files{"", {audit_file{as_path, 0}}}}};
  return std::nullopt;
}

bool log_selection::single_file() const {
  return files.size() == 1 && files.front().files.size() == 1 &&
         files.front().files.front().generation == 0;
}

std::string new_session_id() {
  unsigned char bytes[4];
  // No fallback to a weaker generator: the id names a file and tags every log line.
  if (RAND_bytes(bytes, sizeof bytes) != 1) throw std::runtime_error("RAND_bytes failed");
  char buf[16];
  std::snprintf(buf, sizeof buf, "s-%02x%02x%02x%02x", bytes[0], bytes[1], bytes[2], bytes[3]);
  return buf;
}

}  // namespace broker::session
