// Filtering what MCP servers send (answer_filter.hpp).
#include "mcp/answer_filter.hpp"

namespace broker::mcp {
namespace {

// A tools/list result: {"result": {"tools": [...]}} with an id.
nlohmann::json* tools_of(nlohmann::json& message) {
  if (!message.is_object()) return nullptr;
  const auto result = message.find("result");
  if (result == message.end() || !result->is_object()) return nullptr;
  const auto tools = result->find("tools");
  if (tools == result->end() || !tools->is_array()) return nullptr;
  return &*tools;
}

std::string dumped(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// The fields in which a listed tool changed since its pin; empty with no pins. The pin is the
// team's pins file's where a scope ships one (the first such), else the session's first listing.
std::vector<std::string> check_pin(const nlohmann::json& tool, const std::string& name,
                                   const server_pins* pins, const scopes& rules) {
  if (!pins || !pins->store) return {};
  const tool_digest now = digest_of(tool);
  for (const auto& scope : rules) {
    if (!scope.rules->pins) continue;
    const auto& file = scope.rules->pins->tools;
    const auto it = file.find(name);
    return pins->store->check_against(pins->server, name, now,
                                      it == file.end() ? nullptr : &it->second);
  }
  return pins->store->check(pins->server, name, now);
}

std::string joined(const std::vector<std::string>& fields) {
  std::string out;
  for (const auto& f : fields) out += (out.empty() ? "" : ", ") + f;
  return out;
}

}  // namespace

std::size_t filter_tools(nlohmann::json& message, const scopes& rules, const server_pins* pins,
                         std::vector<std::string>* changed) {
  std::size_t removed = 0;
  if (message.is_array()) {
    for (auto& m : message) removed += filter_tools(m, rules, pins, changed);
    return removed;
  }
  nlohmann::json* tools = tools_of(message);
  if (!tools) return 0;
  // The tools to drop, by index; what stays is left in place (the message may go on as it is).
  std::vector<std::size_t> dropped;
  for (std::size_t i = 0; i < tools->size(); ++i) {
    const nlohmann::json& tool = (*tools)[i];
    // A tool without a readable name could be anything: it is not listed.
    const auto name = tool.is_object() ? tool.find("name") : tool.end();
    if (!tool.is_object() || name == tool.end() || !name->is_string() ||
        !tool_listed(name->get_ref<const std::string&>(), rules)) {
      dropped.push_back(i);
      continue;
    }
    const std::string& text = name->get_ref<const std::string&>();
    if (auto fields = check_pin(tool, text, pins, rules); !fields.empty()) {
      if (changed) changed->push_back(text + " (" + joined(fields) + ")");
      // Asked about at its calls: listed as it now is.
      if (!asks_on_change(rules)) dropped.push_back(i);
    }
  }
  if (dropped.empty()) return 0;
  nlohmann::json kept = nlohmann::json::array();
  auto next = dropped.begin();
  for (std::size_t i = 0; i < tools->size(); ++i) {
    if (next != dropped.end() && *next == i) {
      ++next;
      continue;
    }
    kept.push_back(std::move((*tools)[i]));
  }
  *tools = std::move(kept);
  return dropped.size();
}

bool may_list_tools(std::string_view text) {
  return text.find("\"tools\"") != std::string_view::npos ||
         text.find("\\u") != std::string_view::npos;
}

std::optional<std::string> filter_json_answer(std::string_view body, const scopes& rules,
                                              const server_pins* pins,
                                              std::vector<std::string>* changed) {
  if (!may_list_tools(body)) return std::nullopt;
  std::string why;
  auto j = parse_strict(body, why);
  if (!j) throw unreadable_answer("an MCP answer the broker cannot read: " + why);
  if (filter_tools(*j, rules, pins, changed) == 0) return std::nullopt;
  return dumped(*j);
}

std::optional<call_outcome> outcome_in(const nlohmann::json& message, std::string_view id) {
  if (message.is_array()) {
    for (const auto& m : message)
      if (auto found = outcome_in(m, id)) return found;
    return std::nullopt;
  }
  if (!message.is_object()) return std::nullopt;
  const auto at = message.find("id");
  if (at == message.end() || at->is_null() || dumped(*at) != id) return std::nullopt;
  if (const auto error = message.find("error"); error != message.end()) {
    call_outcome o{"error", std::nullopt};
    if (error->is_object())
      if (const auto code = error->find("code"); code != error->end() && code->is_number_integer())
        o.code = code->get<long long>();
    return o;
  }
  const auto result = message.find("result");
  if (result == message.end()) return std::nullopt;
  if (result->is_object())
    if (const auto e = result->find("isError"); e != result->end() && *e == true)
      return call_outcome{"tool_error", std::nullopt};
  return call_outcome{"ok", std::nullopt};
}

std::optional<call_outcome> json_answer_outcome(std::string_view body, std::string_view id) {
  if (id.empty() || body.find("\"id\"") == std::string_view::npos) return std::nullopt;
  std::string why;
  const auto j = parse_strict(body, why);
  return j ? outcome_in(*j, id) : std::nullopt;
}

void sse_filter::feed(std::string_view piece, std::string& out) {
  pending_.append(piece);
  std::size_t start = 0;  // the current event's first byte
  for (;;) {
    // Each byte is searched once, however the stream is cut.
    const std::size_t end = pending_.find_first_of("\r\n", search_);
    if (end == std::string::npos) {
      search_ = pending_.size();
      break;
    }
    // A CR last: a LF may follow in the next piece, and the two are one line ending.
    if (pending_[end] == '\r' && end + 1 == pending_.size()) {
      search_ = end;
      break;
    }
    const std::size_t next = end + (pending_[end] == '\r' && pending_[end + 1] == '\n' ? 2 : 1);
    const bool blank = end == line_;
    line_ = search_ = next;
    if (!blank) continue;
    emit_range(start, next, out);
    start = next;
  }
  pending_.erase(0, start);
  line_ -= start;
  search_ -= start;
  if (pending_.size() > max_message_bytes + 64 * 1024)
    throw unreadable_answer("an MCP server's event over " + std::to_string(max_message_bytes) +
                            " bytes");
}

void sse_filter::finish(std::string& out) {
  // A CR held back for a LF that never came ends its line.
  if (!pending_.empty() && pending_.back() == '\r' && search_ + 1 == pending_.size()) {
    pending_.push_back('\n');
    feed({}, out);
  }
  pending_.clear();
  line_ = search_ = 0;
}

void sse_filter::emit_range(std::size_t begin, std::size_t end, std::string& out) {
  const std::string_view raw = std::string_view(pending_).substr(begin, end - begin);
  // Its fields, line by line (the last line is the blank one).
  std::string data;
  bool has_data = false;
  std::vector<std::string_view> kept;  // every line but the data lines and the blank one
  std::size_t pos = 0;
  while (pos < raw.size()) {
    std::size_t eol = raw.find_first_of("\r\n", pos);
    const std::string_view line = raw.substr(pos, eol - pos);
    pos = eol + (raw[eol] == '\r' && eol + 1 < raw.size() && raw[eol + 1] == '\n' ? 2 : 1);
    if (line.empty()) break;
    const std::size_t colon = line.find(':');
    const std::string_view field = line.substr(0, colon);
    if (field != "data") {
      kept.push_back(line);
      continue;
    }
    std::string_view value = colon == std::string_view::npos ? "" : line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    if (has_data) data.push_back('\n');
    data.append(value);
    has_data = true;
  }
  // The watched request's answer is read for its outcome (only until it has come).
  const bool watched =
      has_data && !outcome_ && !watch_.empty() && data.find("\"id\"") != std::string::npos;
  if (!has_data || (!may_list_tools(data) && !watched)) {
    out.append(raw);
    return;
  }
  std::string why;
  auto j = parse_strict(data, why);
  if (!j) {
    if (may_list_tools(data))
      return;  // dropped: it could list tools, and the broker cannot read it
    out.append(raw);
    return;
  }
  if (watched) outcome_ = outcome_in(*j, watch_);
  const std::size_t removed = filter_tools(*j, rules_, pins_ ? &*pins_ : nullptr, &changed_);
  if (removed == 0) {
    out.append(raw);
    return;
  }
  removed_ += removed;
  for (std::string_view line : kept) out.append(line).push_back('\n');
  out.append("data: ").append(dumped(*j)).append("\n\n");
}

}  // namespace broker::mcp
