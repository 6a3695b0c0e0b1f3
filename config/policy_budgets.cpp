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

}  // namespace

budget_spec parse_budgets(const json_node& section) {
  section.expect_object("expected an object");
  section.reject_unknown_keys(
      {"requests", "bytes_out", "bytes_in", "duration", "llm_tokens", "rate", "on_exhaust"});
  budget_spec b;
  if (auto n = section.find("requests")) b.requests = parse_count(*n);
  if (auto n = section.find("llm_tokens")) b.llm_tokens = parse_count(*n);
  if (auto n = section.find("bytes_out")) b.bytes_out = parse_bytes(*n);
  if (auto n = section.find("bytes_in")) b.bytes_in = parse_bytes(*n);
  if (auto n = section.find("duration")) {
    auto d = n->value().is_string() ? parse_duration(n->value().get<std::string>()) : std::nullopt;
    if (!d) n->fail("expected a duration such as \"2h\", \"90s\" or \"1h30m\"");
    b.duration = *d;
  }
  if (auto n = section.find("rate")) {
    auto r = n->value().is_string() ? parse_rate(n->value().get<std::string>()) : std::nullopt;
    if (!r) n->fail("expected a rate such as \"20/s\", \"100/m\" or \"5/10s\"");
    b.request_rate = *r;
  }
  if (auto n = section.find("on_exhaust")) {
    std::string action = n->value().is_string() ? n->value().get<std::string>() : "";
    if (action == "deny")
      b.on_exhaust = exhaust_action::deny;
    else if (action == "kill")
      b.on_exhaust = exhaust_action::kill;
    else
      n->fail("expected \"deny\" or \"kill\"");
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
  section.reject_unknown_keys({"mask", "pass"});
  files_spec f;
  if (auto n = section.find("mask")) f.mask = parse_names(*n);
  if (auto n = section.find("pass")) f.pass = parse_names(*n);
  return f;
}

}  // namespace broker::config
