// AWS credentials from the environment, a shared credentials file or a credential_process
// command. Values only ever move from the source's buffer into `secret`s; messages name the
// source, the profile and line numbers, never a value.
#include "brokers/aws_credentials.hpp"
#include "base/text.hpp"

#include <array>
#include <cctype>
#include <utility>

#include "brokers/secret_json.hpp"

namespace broker::brokers {
namespace {

using std::chrono::system_clock;

// ---- env: ----

std::optional<aws_credentials> from_environment(const std::string& source,
                                                const std::vector<std::string>& env_names,
                                                const source_limits& limits) {
  std::array<std::string, 3> names;
  for (std::size_t i = 0; i < names.size(); ++i)
    names[i] = i < env_names.size() && !env_names[i].empty()
                   ? env_names[i]
                   : std::string(default_aws_env_names[i]);
  auto key_id = load_secret("env:" + names[0], limits);
  auto secret_key = load_secret("env:" + names[1], limits);
  if (!key_id && !secret_key) return std::nullopt;
  if (!key_id || !secret_key) {
    const std::string& set = key_id ? names[0] : names[1];
    const std::string& unset = key_id ? names[1] : names[0];
    throw source_error(source + ": " + set + " is set but " + unset + " is not");
  }
  aws_credentials credentials;
  credentials.access_key_id = std::move(*key_id);
  credentials.secret_access_key = std::move(*secret_key);
  if (auto token = load_secret("env:" + names[2], limits))
    credentials.session_token = std::move(*token);
  return credentials;
}

// ---- file: ----

std::optional<aws_credentials> credentials_from_file(const std::string& source,
                                                     std::string_view rest,
                                                     const source_limits& limits) {
  // "PATH#PROFILE": the last '#' starts the profile, unless what follows it is a path.
  std::string_view path = rest;
  std::string profile = "default";
  const std::size_t hash = rest.rfind('#');
  if (hash != std::string_view::npos && rest.find('/', hash) == std::string_view::npos) {
    path = rest.substr(0, hash);
    profile = std::string(base::trim(rest.substr(hash + 1)));
    if (profile.empty()) throw source_error(source + ": the profile after '#' is empty");
  }
  const std::string file_source = "file:" + std::string(path);
  // Untrimmed, so that line numbers in messages are the file's.
  auto text = load_secret_untrimmed(file_source, limits);
  if (!text) return std::nullopt;
  auto credentials = parse_shared_credentials(text->expose(), profile, file_source);
  if (!credentials) throw source_error(file_source + ": there is no profile \"" + profile + "\"");
  return credentials;
}

// ---- cmd: ----

std::optional<aws_credentials> credentials_from_command(const std::string& source,
                                                        const source_limits& limits) {
  auto output = load_secret(source, limits);  // a command that prints nothing throws
  if (!output) throw source_error(source + ": printed nothing");
  try {
    return parse_process_credentials(output->expose());
  } catch (const source_error& e) {
    throw source_error(source + ": " + e.what());
  }
}

// ---- RFC 3339 ----

bool expect(std::string_view text, std::size_t& at, std::string_view one_of) {
  if (at >= text.size() || one_of.find(text[at]) == std::string_view::npos) return false;
  ++at;
  return true;
}

}  // namespace

std::optional<system_clock::time_point> parse_rfc3339(std::string_view text) {
  using namespace std::chrono;
  std::size_t at = 0;
  auto year = base::read_digits(text, at, 4);
  if (!year || !expect(text, at, "-")) return std::nullopt;
  auto month = base::read_digits(text, at, 2);
  if (!month || !expect(text, at, "-")) return std::nullopt;
  auto day = base::read_digits(text, at, 2);
  if (!day || !expect(text, at, "Tt ")) return std::nullopt;
  auto hour = base::read_digits(text, at, 2);
  if (!hour || !expect(text, at, ":")) return std::nullopt;
  auto minute = base::read_digits(text, at, 2);
  if (!minute || !expect(text, at, ":")) return std::nullopt;
  auto second = base::read_digits(text, at, 2);
  if (!second) return std::nullopt;
  const year_month_day date{std::chrono::year(*year), std::chrono::month(*month),
                            std::chrono::day(*day)};
  if (!date.ok() || *hour > 23 || *minute > 59 || *second > 59) return std::nullopt;

  nanoseconds fraction{0};
  if (at < text.size() && text[at] == '.') {
    ++at;
    const std::size_t first = at;
    long long scale = 100'000'000;
    while (at < text.size() && text[at] >= '0' && text[at] <= '9') {
      fraction += nanoseconds((text[at] - '0') * scale);  // digits past nanoseconds add 0
      scale /= 10;
      ++at;
    }
    if (at == first) return std::nullopt;
  }

  minutes offset{0};
  if (expect(text, at, "Zz")) {
  } else if (at < text.size() && (text[at] == '+' || text[at] == '-')) {
    const bool east = text[at++] == '+';
    auto off_hour = base::read_digits(text, at, 2);
    if (!off_hour || !expect(text, at, ":")) return std::nullopt;
    auto off_minute = base::read_digits(text, at, 2);
    if (!off_minute || *off_hour > 23 || *off_minute > 59) return std::nullopt;
    offset = hours(*off_hour) + minutes(*off_minute);
    if (!east) offset = -offset;
  } else {
    return std::nullopt;  // a time without an offset is local to somewhere unknown
  }
  if (at != text.size()) return std::nullopt;

  const auto local = sys_days(date) + hours(*hour) + minutes(*minute) + seconds(*second);
  return time_point_cast<system_clock::duration>(local - offset + fraction);
}

aws_credentials parse_process_credentials(std::string_view json) {
  secret_json doc(json, "process credentials");
  const nlohmann::json* version = doc.find("Version");
  if (version == nullptr) throw source_error(doc.message("\"Version\" is missing"));
  if (!version->is_number_integer()) throw source_error(doc.message("\"Version\" is not a number"));
  if (version->get<long long>() != 1)
    throw source_error(doc.message("\"Version\" " + std::to_string(version->get<long long>()) +
                                   " is not supported (expected 1)"));

  aws_credentials credentials;
  auto key_id = doc.take_secret("AccessKeyId");
  if (!key_id || key_id->empty()) throw source_error(doc.message("\"AccessKeyId\" is missing"));
  credentials.access_key_id = std::move(*key_id);
  auto secret_key = doc.take_secret("SecretAccessKey");
  if (!secret_key || secret_key->empty())
    throw source_error(doc.message("\"SecretAccessKey\" is missing"));
  credentials.secret_access_key = std::move(*secret_key);
  if (auto token = doc.take_secret("SessionToken")) credentials.session_token = std::move(*token);

  if (auto expiration = doc.text("Expiration")) {
    credentials.expiration = parse_rfc3339(*expiration);
    if (!credentials.expiration)
      throw source_error(doc.message("\"Expiration\" is not an RFC 3339 date-time"));
  }
  return credentials;
}

std::optional<aws_credentials> parse_shared_credentials(std::string_view text,
                                                        std::string_view profile,
                                                        std::string_view file_name_for_errors) {
  const std::string where =
      std::string(file_name_for_errors) + ", profile \"" + std::string(profile) + "\"";
  std::size_t line_number = 0;
  auto syntax_error = [&](std::string_view what) {
    return source_error(where + ": line " + std::to_string(line_number) + ": " + std::string(what));
  };

  bool in_section = false;  // a setting before the first [section] is an error
  bool in_profile = false;
  bool found = false;
  bool nested = false;  // the last key had no value: indented lines below it are its settings
  std::optional<base::secret> key_id, secret_key, token;
  for (std::size_t at = 0; at <= text.size();) {
    std::size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view raw = text.substr(at, end - at);
    at = end + 1;
    ++line_number;

    const std::string_view line = base::trim(raw);
    if (line.empty() || line.front() == '#' || line.front() == ';') continue;

    if (line.front() == '[') {
      const std::size_t close = line.find(']');
      if (close == std::string_view::npos) throw syntax_error("a section without \"]\"");
      const std::string_view after = base::trim(line.substr(close + 1));
      if (!after.empty() && after.front() != '#' && after.front() != ';')
        throw syntax_error("text after a section's \"]\"");
      std::string_view name = base::trim(line.substr(1, close - 1));
      // The config file's spelling, "[profile NAME]", names the same profile.
      if (name.starts_with("profile") && name.size() > 7 && base::is_space(name[7]))
        name = base::trim(name.substr(7));
      if (name.empty()) throw syntax_error("a section without a name");
      in_section = true;
      in_profile = name == profile;
      found = found || in_profile;
      nested = false;
      continue;
    }

    if (nested && base::is_space(raw.front())) continue;
    const std::size_t delimiter = line.find_first_of("=:");
    if (delimiter == std::string_view::npos)
      throw syntax_error("expected \"key = value\", \"[profile]\" or a comment");
    const std::string key = base::lower(base::trim(line.substr(0, delimiter)));
    const std::string_view value = base::trim(line.substr(delimiter + 1));
    if (key.empty()) throw syntax_error("a value without a key");
    if (!in_section) throw syntax_error("a setting before the first [section]");
    nested = value.empty();
    if (!in_profile) continue;

    std::optional<base::secret>* slot = key == "aws_access_key_id"       ? &key_id
                                        : key == "aws_secret_access_key" ? &secret_key
                                        : key == "aws_session_token"     ? &token
                                                                         : nullptr;
    if (slot == nullptr) continue;  // region, output, role_arn...: not ours
    if (slot->has_value()) throw syntax_error(key + " appears twice");
    *slot = base::secret(std::string(value));
  }

  if (!found) return std::nullopt;
  if (!key_id || key_id->empty()) throw source_error(where + ": no aws_access_key_id");
  if (!secret_key || secret_key->empty()) throw source_error(where + ": no aws_secret_access_key");
  aws_credentials credentials;
  credentials.access_key_id = std::move(*key_id);
  credentials.secret_access_key = std::move(*secret_key);
  if (token) credentials.session_token = std::move(*token);
  return credentials;
}

std::optional<aws_credentials> load_aws_credentials(const std::string& source,
                                                    const std::vector<std::string>& env_names,
                                                    const source_limits& limits) {
  std::string_view text = source;
  if (text.starts_with("env:")) return from_environment(source, env_names, limits);
  if (text.starts_with("file:")) return credentials_from_file(source, text.substr(5), limits);
  if (text.starts_with("cmd:")) return credentials_from_command(source, limits);
  throw source_error(source + ": unknown source (expected env:, file: or cmd:)");
}

}  // namespace broker::brokers
