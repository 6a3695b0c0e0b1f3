// "ssh": the keys a wrap session's agent holds and the host keys it trusts (docs/policy.md, "SSH").
#include <algorithm>
#include <array>
#include <cstdint>

#include "base/text.hpp"
#include "config/policy_sections.hpp"

namespace broker::config {
namespace {

constexpr std::array<std::string_view, 6> host_key_types{
    "ssh-ed25519",         "ssh-rsa",
    "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521", "sk-ssh-ed25519@openssh.com"};

// The first SSH "string" (RFC 4251 §5) of a key blob: its type.
std::string_view blob_type(std::string_view blob) {
  if (blob.size() < 4) return {};
  const std::size_t n = (std::size_t(std::uint8_t(blob[0])) << 24) |
                        (std::size_t(std::uint8_t(blob[1])) << 16) |
                        (std::size_t(std::uint8_t(blob[2])) << 8) | std::uint8_t(blob[3]);
  if (n > blob.size() - 4) return {};
  return blob.substr(4, n);
}

std::vector<std::string_view> fields_of(std::string_view line) {
  std::vector<std::string_view> out;
  for (;;) {
    line = base::trim(line);
    if (line.empty()) return out;
    std::size_t end = 0;
    while (end < line.size() && !base::is_space(line[end])) ++end;
    out.push_back(line.substr(0, end));
    line.remove_prefix(end);
  }
}

// One known_hosts line (sshd(8) "SSH_KNOWN_HOSTS FILE FORMAT") without a marker: host names,
// a key type and its base64 blob, whose own type must agree; a comment may follow.
void check_host_key(const std::string& line, const json_node& item) {
  const auto fields = fields_of(line);
  if (fields.size() < 3 || fields[0].starts_with('@') || fields[0].starts_with('|'))
    item.fail("expected a known_hosts line: \"HOST[,HOST...] KEYTYPE BASE64\"");
  if (std::find(host_key_types.begin(), host_key_types.end(), fields[1]) == host_key_types.end())
    item.fail("unknown key type \"" + std::string(fields[1]) +
              "\" (ssh-ed25519, ssh-rsa, ecdsa-sha2-nistp256/384/521)");
  const auto blob = base::base64_decode(fields[2]);
  if (!blob || blob_type(*blob) != fields[1])
    item.fail("the key is not base64 of a \"" + std::string(fields[1]) + "\" key");
  if (line.find_first_of("\r\n") != std::string::npos) item.fail("one line per key");
}

std::vector<std::string> parse_key_paths(const json_node& node) {
  std::vector<std::string> out;
  for (auto& [path, item] : node.string_elements()) {
    if (path.empty() || (path.front() != '/' && !path.starts_with("~/")))
      item.fail("expected a private key file: an absolute path or one under ~/");
    out.push_back(path);
  }
  return out;
}

}  // namespace

ssh_spec parse_ssh(const json_node& section) {
  section.expect_object("expected an object: {\"keys\": [...], \"host_keys\": [...]}");
  section.reject_unknown_keys({"keys", "host_keys"});
  ssh_spec s;
  if (auto keys = section.find("keys")) s.keys = parse_key_paths(*keys);
  if (auto lines = section.find("host_keys")) {
    for (auto& [line, item] : lines->string_elements()) {
      check_host_key(line, item);
      s.host_keys.push_back(line);
    }
  }
  return s;
}

}  // namespace broker::config
