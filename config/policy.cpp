#include "config/policy.hpp"

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include <openssl/evp.h>

#include "base/digest.hpp"
#include "base/text.hpp"
#include "config/located_json.hpp"
#include "config/policy_sections.hpp"

namespace broker::config {
namespace {

// Policy files are hand-written and small; the bound stops a wrong path (a log, a device)
// from being read into memory whole.
constexpr std::size_t max_policy_bytes = 1 << 20;

std::string format_error(const std::string& file, int line, const std::string& key,
                         const std::string& message) {
  std::string out = file;
  if (line > 0) out += ":" + std::to_string(line);
  out += ": ";
  if (!key.empty()) out += key + ": ";
  return out + message;
}

}  // namespace

policy_error::policy_error(std::string file, int line, std::string key, std::string message)
    : std::runtime_error(format_error(file, line, key, message)),
      file_(std::move(file)),
      line_(line),
      key_(std::move(key)),
      message_(std::move(message)) {}

policy parse_policy(std::string_view text, const std::string& source) {
  located_json doc = parse_located_json(text, source);
  json_node root(doc);
  root.expect_object("a policy is a JSON object");
  root.reject_unknown_keys({"version", "enforcement", "on_deny", "approvals", "allow", "deny",
                            "credentials", "budgets", "env", "files", "ssh"});

  if (auto version = root.find("version")) {
    const auto& v = version->value();
    bool one = v.is_number_integer() && v.get<std::int64_t>() == 1;
    if (!one) version->fail("unsupported version " + v.dump() + " (this broker reads version 1)");
  }

  policy p;
  p.source = source;
  p.sha256 = base::sha256_hex(text);
  if (auto mode = root.find("enforcement")) {
    const std::string value = mode->as_string();
    if (value == "audit")
      p.enforcement = enforcement::audit;
    else if (value != "enforce")
      mode->fail("expected \"enforce\" or \"audit\", not \"" + value + "\"");
  }
  if (auto mode = root.find("on_deny")) {
    const std::string value = mode->as_string();
    if (value == "ask")
      p.on_deny = on_deny::ask;
    else if (value == "deny")
      p.on_deny = on_deny::deny;
    else
      mode->fail("expected \"deny\" or \"ask\", not \"" + value + "\"");
  }
  if (auto approvals = root.find("approvals")) p.never_approve = parse_approvals(*approvals);
  if (auto allow = root.find("allow")) p.allow = parse_rules(*allow, /*allow_list=*/true);
  if (auto deny = root.find("deny")) p.deny = parse_rules(*deny, /*allow_list=*/false);
  if (auto credentials = root.find("credentials"))
    p.credentials = parse_credentials(*credentials, p.allow);
  if (auto budgets = root.find("budgets")) p.budgets = parse_budgets(*budgets);
  if (auto env = root.find("env")) p.env = parse_env(*env);
  if (auto files = root.find("files")) p.files = parse_files(*files);
  if (auto ssh = root.find("ssh")) p.ssh = parse_ssh(*ssh);
  return p;
}

policy load_policy_file(const std::filesystem::path& path) {
  const std::string source = path.string();
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(source.c_str(), "rb"),
                                                       std::fclose);
  if (!file) throw policy_error(source, 0, "", std::string("cannot open: ") + std::strerror(errno));
  std::string text;
  std::array<char, 8192> buffer{};
  for (;;) {
    std::size_t n = std::fread(buffer.data(), 1, buffer.size(), file.get());
    text.append(buffer.data(), n);
    if (text.size() > max_policy_bytes)
      throw policy_error(source, 0, "",
                         "larger than " + std::to_string(max_policy_bytes) + " bytes");
    if (n < buffer.size()) break;
  }
  if (std::ferror(file.get()))
    throw policy_error(source, 0, "", std::string("cannot read: ") + std::strerror(errno));
  return parse_policy(text, source);
}

}  // namespace broker::config
