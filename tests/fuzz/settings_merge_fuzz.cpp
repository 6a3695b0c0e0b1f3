// What of an agent's settings goes back from a session (sandbox/settings_merge.hpp): the session's
// file is a hostile command's, the host's the user's. Input: one selector byte (JSON or TOML),
// then the start, the host's file and the session's, separated by NUL bytes. The merge never
// throws or crashes; a member that is not data keeps the host's value in what goes back (read
// back, the result is the host's file outside the data members); and what goes back, merged
// again against itself, takes nothing more.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "fuzz_support.hpp"
#include "sandbox/settings_merge.hpp"

namespace {

using namespace broker;
using fuzz::check;
using sandbox::member_rules;
using sandbox::settings_format;

const member_rules rules{{"model", "projects.*.history", "projects.{workspace}.trusted", "a.b"},
                         {"/w"}};

// `doc` without the members the rules call data (at the depths the rules name), and without
// the objects a merge makes to hold them when they end up empty.
nlohmann::ordered_json without_data(nlohmann::ordered_json doc) {
  if (!doc.is_object()) return doc;
  doc.erase("model");
  if (auto a = doc.find("a"); a != doc.end() && a->is_object()) {
    a->erase("b");
    if (a->empty()) doc.erase("a");
  }
  if (auto p = doc.find("projects"); p != doc.end() && p->is_object()) {
    nlohmann::ordered_json kept = nlohmann::ordered_json::object();
    for (auto& [name, project] : p->items()) {
      if (project.is_object()) {
        project.erase("history");
        if (name == "/w" || name.starts_with("/w/")) project.erase("trusted");
        if (project.empty()) continue;
      }
      kept[name] = project;
    }
    if (kept.empty())
      doc.erase("projects");
    else
      *p = kept;
  }
  return doc;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  if (size < 1) return 0;
  const auto format = bytes[0] & 1 ? settings_format::toml : settings_format::json;
  std::string_view rest(reinterpret_cast<const char*>(bytes + 1), size - 1);
  std::string_view parts[3];
  for (auto& part : parts) {
    const std::size_t nul = rest.find('\0');
    part = rest.substr(0, nul);
    rest = nul == std::string_view::npos ? std::string_view() : rest.substr(nul + 1);
  }
  const auto [base, host, session] = parts;
  const auto merged = sandbox::merge_settings(format, rules, base, host, session);
  if (!merged.text) return 0;
  check(merged.readable, "text from a session file that could not be read");
  const auto again = sandbox::merge_settings(format, rules, base, *merged.text, session);
  check(again.readable, "the merged file cannot be read back");
  if (format != settings_format::json) return 0;
  const auto result = nlohmann::ordered_json::parse(*merged.text, nullptr, false);
  const auto original = nlohmann::ordered_json::parse(host, nullptr, false);
  check(!result.is_discarded(), "the merged file is no JSON");
  if (!original.is_discarded() && !host.empty() && merged.text != session && original.is_object() &&
      result.is_object())
    check(without_data(result) == without_data(original), "a member not data changed");
  return 0;
}
