// Pins against changed tools (pins.hpp).
#include "mcp/pins.hpp"

#include <openssl/evp.h>

#include "base/digest.hpp"
#include "base/text.hpp"

namespace broker::mcp {
namespace {

std::string sha256_of(const nlohmann::json& value) {
  return base::sha256_hex(value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

const nlohmann::json& field(const nlohmann::json& tool, const char* key) {
  static const nlohmann::json none;
  if (!tool.is_object()) return none;
  const auto it = tool.find(key);
  return it == tool.end() ? none : *it;
}

}  // namespace

tool_digest digest_of(const nlohmann::json& tool) {
  return {sha256_of(field(tool, "description")), sha256_of(field(tool, "inputSchema")),
          sha256_of(field(tool, "annotations"))};
}

std::vector<std::string> changed_fields(const tool_digest& pinned, const tool_digest& now) {
  std::vector<std::string> out;
  if (pinned.description != now.description) out.emplace_back("description");
  if (pinned.input_schema != now.input_schema) out.emplace_back("inputSchema");
  if (pinned.annotations != now.annotations) out.emplace_back("annotations");
  return out;
}

std::vector<std::string> pin_store::check(const std::string& server, const std::string& tool,
                                          const tool_digest& now) {
  // Its first listing is its pin.
  return check_against(server, tool, now, &now);
}

std::vector<std::string> pin_store::check_against(const std::string& server,
                                                  const std::string& tool, const tool_digest& now,
                                                  const tool_digest* pinned) {
  std::lock_guard lock(mutex_);
  auto& tools = servers_[server];
  auto it = tools.find(tool);
  if (it == tools.end()) {
    // The file's pin, or none: a tool the team did not pin is held as changed from the start.
    pin first{pinned ? *pinned : now, now, {}};
    if (!pinned) first.changed = {std::string(not_pinned)};
    it = tools.emplace(tool, std::move(first)).first;
  } else if (it->second.unset) {
    it->second = pin{now, now, {}, false};  // accepted by a person before it was listed
    return {};
  }
  it->second.latest = now;
  if (auto fields = changed_fields(it->second.first, now); !fields.empty())
    it->second.changed = fields;
  return it->second.changed;
}

std::vector<std::string> pin_store::changed(const std::string& server,
                                            const std::string& tool) const {
  std::lock_guard lock(mutex_);
  const auto s = servers_.find(server);
  if (s == servers_.end()) return {};
  const auto t = s->second.find(tool);
  return t == s->second.end() ? std::vector<std::string>() : t->second.changed;
}

namespace {

std::string key_of(const tool_digest& d) {
  return d.description + "/" + d.input_schema + "/" + d.annotations;
}

}  // namespace

void pin_store::accept(const std::string& server, const std::string& tool,
                       const std::string& shown) {
  std::lock_guard lock(mutex_);
  auto& tools = servers_[server];
  const auto t = tools.find(tool);
  if (t == tools.end()) {
    if (shown.empty()) tools.emplace(tool, pin{{}, {}, {}, true});
    return;
  }
  if (t->second.unset || key_of(t->second.latest) != shown) return;
  t->second.first = t->second.latest;
  t->second.changed.clear();
}

std::string pin_store::latest(const std::string& server, const std::string& tool) const {
  std::lock_guard lock(mutex_);
  const auto s = servers_.find(server);
  if (s == servers_.end()) return {};
  const auto t = s->second.find(tool);
  return t == s->second.end() || t->second.unset ? std::string() : key_of(t->second.latest);
}

bool pin_store::known(const std::string& server, const std::string& tool) const {
  std::lock_guard lock(mutex_);
  const auto s = servers_.find(server);
  return s != servers_.end() && s->second.contains(tool);
}

}  // namespace broker::mcp
