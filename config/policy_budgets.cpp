// "budgets", "env" and "files": the session limits and the child-environment lists.
#include "config/policy_sections.hpp"

namespace broker::config {
namespace {

std::uint64_t parse_count(const json_node& node) {
  const auto& v = node.value();
  if (v.is_number_unsigned()) return v.get<std::uint64_t>();
  if (v.is_number_integer() && v.get<std::int64_t>() >= 0) return v.get<std::uint64_t>();
  node.fail("expected a non-negative integer");
}

std::uint64_t parse_bytes(const json_node& node) {
  const auto& v = node.value();
  if (v.is_number_unsigned()) return v.get<std::uint64_t>();
  if (v.is_string()) {
    if (auto size = parse_size(v.get<std::string>())) return *size;
  }
  node.fail("expected a size such as \"100MB\" or \"1GiB\", or a byte count");
}

double parse_cost(const json_node& node) {
  const auto& v = node.value();
  if (!v.is_number() || !(v.get<double>() > 0)) node.fail("expected a positive number of USD");
  return v.get<double>();
}

void parse_amounts(const json_node& node, budget_amounts& b) {
  if (auto n = node.find("requests")) b.requests = parse_count(*n);
  if (auto n = node.find("llm_tokens")) b.llm_tokens = parse_count(*n);
  if (auto n = node.find("bytes_out")) b.bytes_out = parse_bytes(*n);
  if (auto n = node.find("bytes_in")) b.bytes_in = parse_bytes(*n);
  if (auto n = node.find("cost_usd")) b.cost_usd = parse_cost(*n);
  if (auto n = node.find("rate")) {
    auto r = n->value().is_string() ? parse_rate(n->value().get<std::string>()) : std::nullopt;
    if (!r) n->fail("expected a rate such as \"20/s\", \"100/m\" or \"5/10s\"");
    b.request_rate = *r;
  }
}

// A model name or a prefix ending in "*": printable ASCII without spaces, "*" only last.
std::optional<std::string> model_pattern(std::string_view text) {
  if (text.empty() || text.size() > 200) return std::nullopt;
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c <= ' ' || c > '~' || (c == '*' && i + 1 != text.size())) return std::nullopt;
    out += c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c;
  }
  return out;
}

double parse_price(const json_node& entry, const char* name) {
  auto n = entry.find(name);
  if (!n) entry.fail(std::string("missing \"") + name + "\" (USD per million tokens)");
  const auto& v = n->value();
  if (!v.is_number() || !(v.get<double>() >= 0))
    n->fail("expected a non-negative number (USD per million tokens)");
  return v.get<double>();
}

std::map<std::string, model_price> parse_prices(const json_node& section) {
  std::map<std::string, model_price> prices;
  for (const auto& [text, entry] : section.members("expected an object of model prices")) {
    auto pattern = model_pattern(text);
    if (!pattern)
      entry.fail("invalid model pattern \"" + text +
                 "\" (a model name, or a prefix ending in \"*\")");
    entry.expect_object("expected an object with input_per_mtok and output_per_mtok");
    entry.reject_unknown_keys({"input_per_mtok", "output_per_mtok"});
    model_price price;
    price.input_per_mtok = parse_price(entry, "input_per_mtok");
    price.output_per_mtok = parse_price(entry, "output_per_mtok");
    if (!prices.emplace(*pattern, price).second)
      entry.fail("model pattern \"" + *pattern + "\" is listed twice");
  }
  return prices;
}

std::vector<host_budget_spec> parse_per_host(const json_node& section) {
  std::vector<host_budget_spec> out;
  for (const auto& [text, entry] : section.members("expected an object of host patterns")) {
    auto host = host_pattern::parse(text);
    if (!host)
      entry.fail("invalid host pattern \"" + text +
                 "\" (a host name, \"*.\" + a host name, or \"*\")");
    entry.expect_object("expected an object of budgets");
    // A clearer word than "unknown key" for the session-wide keys.
    for (const char* session_only :
         {"duration", "on_exhaust", "on_state_unavailable", "prices", "per_host"})
      if (auto n = entry.find(session_only))
        n->fail(std::string("\"") + session_only + "\" applies to the whole session, not per host");
    entry.reject_unknown_keys(
        {"requests", "bytes_out", "bytes_in", "llm_tokens", "cost_usd", "rate"});
    for (const auto& other : out)
      if (other.host.text() == host->text())
        entry.fail("host pattern \"" + host->text() + "\" is listed twice");
    host_budget_spec h;
    h.host = *host;
    h.line = entry.line();
    parse_amounts(entry, h);
    out.push_back(std::move(h));
  }
  return out;
}

// Names and paths only; an empty entry is always a mistake.
std::vector<std::string> parse_names(const json_node& node) {
  auto items = node.elements("expected array of strings");
  std::vector<std::string> out;
  for (const auto& item : items) {
    if (!item.value().is_string()) node.fail("expected array of strings");
    std::string text = item.value().get<std::string>();
    if (text.empty()) item.fail("empty string");
    out.push_back(std::move(text));
  }
  return out;
}

// Paths for files.*: absolute, or under the home directory ("~/...", "~").
std::vector<std::string> parse_paths(const json_node& node) {
  std::vector<std::string> out;
  for (const auto& item : node.elements("expected array of strings")) {
    if (!item.value().is_string()) node.fail("expected array of strings");
    std::string p = item.value().get<std::string>();
    if (p.empty() || (p.front() != '/' && p != "~" && !p.starts_with("~/")))
      item.fail("expected an absolute path or one under ~/");
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace

budget_spec parse_budgets(const json_node& section) {
  section.expect_object("expected an object");
  section.reject_unknown_keys({"requests", "bytes_out", "bytes_in", "duration", "llm_tokens",
                               "cost_usd", "rate", "prices", "per_host", "on_exhaust",
                               "on_state_unavailable"});
  budget_spec b;
  parse_amounts(section, b);
  if (auto n = section.find("duration")) {
    auto d = n->value().is_string() ? parse_duration(n->value().get<std::string>()) : std::nullopt;
    if (!d) n->fail("expected a duration such as \"2h\", \"90s\" or \"1h30m\"");
    b.duration = *d;
  }
  if (auto n = section.find("prices")) b.prices = parse_prices(*n);
  if (auto n = section.find("per_host")) b.per_host = parse_per_host(*n);
  if (auto n = section.find("on_exhaust")) {
    std::string action = n->value().is_string() ? n->value().get<std::string>() : "";
    if (action == "deny")
      b.on_exhaust = exhaust_action::deny;
    else if (action == "kill")
      b.on_exhaust = exhaust_action::kill;
    else
      n->fail("expected \"deny\" or \"kill\"");
  }
  if (auto n = section.find("on_state_unavailable")) {
    std::string action = n->value().is_string() ? n->value().get<std::string>() : "";
    if (action != "deny" && action != "allow") n->fail("expected \"deny\" or \"allow\"");
    b.allow_without_state = action == "allow";
  }
  return b;
}

env_spec parse_env(const json_node& section) {
  section.expect_object("expected an object");
  section.reject_unknown_keys({"pass", "strip"});
  env_spec e;
  if (auto n = section.find("pass")) e.pass = parse_names(*n);
  if (auto n = section.find("strip")) e.strip = parse_names(*n);
  return e;
}

files_spec parse_files(const json_node& section) {
  section.expect_object("expected an object");
  section.reject_unknown_keys({"mask", "pass", "readonly", "writable"});
  files_spec f;
  if (auto n = section.find("mask")) f.mask = parse_paths(*n);
  if (auto n = section.find("pass")) f.pass = parse_paths(*n);
  if (auto n = section.find("readonly")) f.readonly = parse_paths(*n);
  if (auto n = section.find("writable")) f.writable = parse_paths(*n);
  return f;
}

}  // namespace broker::config
