#include "session/ocsf.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string_view>

#include "session/log_reader.hpp"

namespace broker::session {
namespace {

using ordered_json = nlohmann::ordered_json;

constexpr int http_activity = 4002;
constexpr int network_category = 4;
constexpr int api_activity = 6003;
constexpr int application_category = 6;
constexpr int api_read = 2;
constexpr int activity_unknown = 0, activity_other = 99;

// HTTP Activity's activity ids, by method (OCSF 1.8.0).
constexpr std::array<std::pair<std::string_view, std::string_view>, 9> methods{{
    {"CONNECT", "Connect"},
    {"DELETE", "Delete"},
    {"GET", "Get"},
    {"HEAD", "Head"},
    {"OPTIONS", "Options"},
    {"POST", "Post"},
    {"PUT", "Put"},
    {"TRACE", "Trace"},
    {"PATCH", "Patch"},
}};

// The record kinds that are one HTTP request or connection (docs/audit-log.md).
bool is_exchange(std::string_view event) {
  return event == "request" || event == "refused" || event == "tunnel" || event == "ask" ||
         event == "exfiltration_blocked" || event == "dns";
}

// `ts` (RFC 3339, UTC, milliseconds) as milliseconds since the epoch; 0 when it does not parse.
long long epoch_ms(const std::string& ts) {
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0, ms = 0;
  if (std::sscanf(ts.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ", &y, &mo, &d, &h, &mi, &s, &ms) < 6)
    return 0;
  using namespace std::chrono;
  const auto day = sys_days(year{y} / month{static_cast<unsigned>(mo)} / static_cast<unsigned>(d));
  return duration_cast<milliseconds>(day.time_since_epoch()).count() +
         ((h * 60LL + mi) * 60 + s) * 1000 + ms;
}

ordered_json product() {
  return {{"name", "broker"}, {"vendor_name", "broker"}, {"version", BROKER_VERSION}};
}

// An event's class (HTTP Activity unless said) and activity: the uids and their names.
struct event_class {
  int uid = http_activity;
  const char* name = "HTTP Activity";
  int category = network_category;
  const char* category_name = "Network Activity";
};

void set_class(ordered_json& e, const event_class& c, int activity, const std::string& name) {
  e["class_uid"] = c.uid;
  e["class_name"] = c.name;
  e["category_uid"] = c.category;
  e["category_name"] = c.category_name;
  e["activity_id"] = activity;
  e["activity_name"] = name;
  e["type_uid"] = c.uid * 100 + activity;
  e["type_name"] = std::string(c.name) + ": " + name;
}

// The fields every event has: class, time, metadata, the session (and user) as actor.
ordered_json common(const nlohmann::json& record, int activity, const std::string& activity_name,
                    const std::string& user) {
  ordered_json e;
  set_class(e, {}, activity, activity_name);
  const std::string ts = string_field(record, "ts");
  e["time"] = epoch_ms(ts);
  ordered_json metadata{{"version", "1.8.0"}, {"product", product()}, {"log_name", "audit"}};
  const std::string session = string_field(record, "session");
  if (const auto seq = integer_field(record, "seq")) {
    metadata["sequence"] = *seq;
    metadata["uid"] = session + "/" + std::to_string(*seq);
  }
  if (!session.empty()) metadata["correlation_uid"] = session;
  if (!ts.empty()) metadata["original_time"] = ts;
  e["metadata"] = std::move(metadata);
  ordered_json actor = ordered_json::object();
  if (!session.empty()) actor["session"] = {{"uid", session}};
  if (!user.empty()) actor["user"] = {{"name", user}};
  if (const auto pid = integer_field(record, "pid")) {
    ordered_json process{{"pid", *pid}};
    const std::string exe = string_field(record, "exe");
    if (!exe.empty()) {
      process["name"] = exe.substr(exe.rfind('/') + 1);
      process["path"] = exe;
    }
    actor["process"] = std::move(process);
  }
  if (!actor.empty()) e["actor"] = std::move(actor);
  return e;
}

// A request, refusal or tunnel.
ordered_json exchange_event(const nlohmann::json& record, const std::string& user) {
  const std::string event = string_field(record, "event");
  const std::string method = string_field(record, "method");
  int activity = method.empty() ? activity_unknown : activity_other;
  std::string activity_name = method.empty() ? "Unknown" : method;
  for (std::size_t i = 0; i < methods.size(); ++i)
    if (method == methods[i].first) {
      activity = static_cast<int>(i) + 1;
      activity_name = methods[i].second;
    }
  ordered_json e = common(record, activity, activity_name, user);

  const std::string decision = string_field(record, "decision");
  const std::string error = string_field(record, "error");
  const bool denied = decision == "deny";
  // action: what the policy did; disposition: the outcome (a would_deny is a violation seen and
  // let through, an ask a request held for a person).
  e["action_id"] = denied ? 2 : 1;
  e["action"] = denied ? "Denied" : "Allowed";
  int disposition = denied ? 2 : 1;
  std::string disposition_name = denied ? "Blocked" : "Allowed";
  if (decision == "would_deny") disposition = 15, disposition_name = "Detected";
  if (event == "ask") disposition = 14, disposition_name = "Delayed";
  e["disposition_id"] = disposition;
  e["disposition"] = disposition_name;
  e["severity_id"] = event == "exfiltration_blocked" ? 4 : denied ? 3 : 1;
  e["severity"] = event == "exfiltration_blocked" ? "High" : denied ? "Medium" : "Informational";
  e["status_id"] = denied || !error.empty() ? 2 : 1;
  e["status"] = denied || !error.empty() ? "Failure" : "Success";
  if (!error.empty()) {
    e["status_code"] = error;
    e["status_detail"] = error;
  }

  const std::string host = string_field(record, "host");
  const std::string scheme = string_field(record, "scheme");
  const std::string target = string_field(record, "path");
  const auto port = integer_field(record, "port");
  ordered_json url = ordered_json::object();
  if (!scheme.empty()) url["scheme"] = scheme;
  if (!host.empty()) url["hostname"] = host;
  if (port) url["port"] = *port;
  if (!target.empty()) {
    const auto query = target.find('?');
    url["path"] = target.substr(0, query);
    if (query != std::string::npos) url["query_string"] = target.substr(query + 1);
  }
  if (!scheme.empty() && !host.empty())
    url["url_string"] =
        scheme + "://" + host + (port ? ":" + std::to_string(*port) : std::string()) + target;
  ordered_json request = ordered_json::object();
  if (!method.empty()) request["http_method"] = method;
  if (!url.empty()) request["url"] = std::move(url);
  request["version"] = string_field(record, "http") == "2" ? "2" : "1.1";
  e["http_request"] = std::move(request);
  if (const auto status = integer_field(record, "status")) {
    e["http_response"] = {{"code", *status}};
    e["http_status"] = *status;
  }
  if (!host.empty()) {
    ordered_json dst{{"hostname", host}};
    if (port) dst["port"] = *port;
    e["dst_endpoint"] = std::move(dst);
  }
  ordered_json traffic = ordered_json::object();
  for (const char* key : {"bytes_out", "bytes_in"})
    if (const auto bytes = integer_field(record, key)) traffic[key] = *bytes;
  if (!traffic.empty()) e["traffic"] = std::move(traffic);
  if (const auto* ms = field(record, "ms"); ms && ms->is_number())
    e["duration"] = std::llround(ms->get<double>());
  const std::string rule = string_field(record, "rule");
  if (!rule.empty()) e["policy"] = {{"name", rule}, {"is_applied", true}};
  e["message"] = format_record(record);

  // What the class has no field for (credential, LLM tokens, the chain's hashes...) stays as it
  // was recorded.
  static constexpr std::array<std::string_view, 16> mapped{
      "ts",   "session", "seq",    "pid",       "exe",      "method", "scheme", "host",
      "port", "path",    "status", "bytes_out", "bytes_in", "ms",     "error",  "http"};
  ordered_json unmapped = ordered_json::object();
  for (const auto& [key, value] : record.items())
    if (std::find(mapped.begin(), mapped.end(), key) == mapped.end()) unmapped[key] = value;
  e["unmapped"] = std::move(unmapped);
  return e;
}

// An MCP call's record (docs/audit-log.md) as API Activity: the JSON-RPC method is the API
// operation, the tool, resource or prompt its resource. Listing and reading are Read; a tool
// call, whose effect the broker cannot tell, is Other.
void as_api_activity(ordered_json& e, const nlohmann::json& record, const nlohmann::json& mcp) {
  const std::string method = string_field(mcp, "method");
  const bool reads =
      method.ends_with("/list") || method == "resources/read" || method == "prompts/get";
  const int activity = reads ? api_read : activity_other;
  const std::string name = reads ? "Read" : method.empty() ? "Other" : method;
  set_class(e, {api_activity, "API Activity", application_category, "Application Activity"},
            activity, name);
  ordered_json api{{"operation", method.empty() ? std::string("(response)") : method}};
  const std::string host = string_field(record, "host");
  if (!host.empty()) api["service"] = {{"name", host}};
  e["api"] = std::move(api);
  for (const char* kind : {"tool", "resource", "prompt"})
    if (auto target = string_field(mcp, kind); !target.empty())
      e["resources"] = ordered_json::array({{{"name", target}, {"type", kind}}});
  // The source is the process that made the call, as far as it is known.
  const std::string exe = string_field(record, "exe");
  e["src_endpoint"] = exe.empty() ? ordered_json{{"type_id", 0}}
                                  : ordered_json{{"name", exe.substr(exe.rfind('/') + 1)}};
  // HTTP Activity's own fields: the status is in http_response, the bytes go unmapped.
  e.erase("http_status");
  if (e.contains("traffic")) {
    e["unmapped"]["traffic"] = std::move(e["traffic"]);
    e.erase("traffic");
  }
}

}  // namespace

ordered_json ocsf_mapper::map(const nlohmann::json& record) {
  const std::string event = string_field(record, "event");
  const std::string session = string_field(record, "session");
  if (event == "session_start") {
    const std::string user = string_field(record, "user");
    if (!user.empty()) users_[session] = user;
  }
  const auto known = users_.find(session);
  const std::string user = known == users_.end() ? std::string() : known->second;
  if (is_exchange(event)) {
    ordered_json e = exchange_event(record, user);
    if (const nlohmann::json* mcp = field(record, "mcp"); mcp != nullptr && mcp->is_object())
      as_api_activity(e, record, *mcp);
    return e;
  }

  // Not an HTTP exchange: an event of activity Other named after the record, all of it unmapped.
  ordered_json e = common(record, activity_other, event.empty() ? "Other" : event, user);
  e["severity_id"] = 1;
  e["severity"] = "Informational";
  e["message"] = format_record(record);
  e["unmapped"] = record;
  if (event == "session_end") users_.erase(session);
  return e;
}

}  // namespace broker::session
