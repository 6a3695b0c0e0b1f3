#include "brokers/aws_credentials.hpp"

#include <stdlib.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "tests/unit/brokers/source_error_of.hpp"
#include "tests/unit/temp_dir.hpp"

namespace base = broker::base;

using broker::brokers::aws_credentials;
using broker::brokers::load_aws_credentials;
using broker::brokers::parse_process_credentials;
using broker::brokers::parse_rfc3339;
using broker::brokers::parse_shared_credentials;
using broker::brokers::source_error;
using broker::test::source_error_of;
using broker::test::temp_dir;
using namespace std::chrono_literals;

namespace {

// Distinctive values: no message may ever contain them.
constexpr std::string_view key_id_value = "AKIDKEYIDVALUE0000001";
constexpr std::string_view secret_value = "wJalrXUtnFEMI/K7MDENG/SECRETVALUEdistinct";
constexpr std::string_view token_value = "FwoGZXIvYXdzTOKENVALUEdistinct==";

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

bool mentions_a_value(const std::string& message) {
  return message.find(key_id_value) != std::string::npos ||
         message.find(secret_value) != std::string::npos ||
         message.find(token_value) != std::string::npos;
}

std::string ini_error(const std::string& text, std::string_view profile = "default") {
  return source_error_of([&] { return parse_shared_credentials(text, profile, "creds.ini"); });
}

std::string load_error(const std::string& source) {
  return source_error_of([&] { return load_aws_credentials(source, {}); });
}

// Sets (or, with nullopt, unsets) a variable for one test and restores it afterwards.
struct scoped_env {
  std::string name;
  std::optional<std::string> old;
  scoped_env(std::string n, const std::optional<std::string>& value) : name(std::move(n)) {
    if (const char* v = ::getenv(name.c_str())) old = v;
    if (value)
      ::setenv(name.c_str(), value->c_str(), 1);
    else
      ::unsetenv(name.c_str());
  }
  ~scoped_env() {
    if (old)
      ::setenv(name.c_str(), old->c_str(), 1);
    else
      ::unsetenv(name.c_str());
  }
};

const std::string several_profiles = std::string() +
                                     "# AWS credentials\n"
                                     "; another comment style\n"
                                     "[default]\n"
                                     "aws_access_key_id = AKIDDEFAULT\n"
                                     "aws_secret_access_key = default-secret\n"
                                     "region = us-east-1\n"
                                     "\n"
                                     "  [ work ]  \n"
                                     "  AWS_Access_Key_ID=" +
                                     std::string(key_id_value) +
                                     "\n"
                                     "\tAWS_SECRET_ACCESS_KEY   =   " +
                                     std::string(secret_value) +
                                     "  \r\n"
                                     "    # indented comment\n"
                                     "aws_session_token =" +
                                     std::string(token_value) +
                                     "\n"
                                     "[profile staging]\n"
                                     "aws_access_key_id: AKIDSTAGING\n"
                                     "aws_secret_access_key=staging/secret+with=equals\n";

std::chrono::system_clock::time_point utc(std::chrono::year_month_day date,
                                          std::chrono::seconds time_of_day) {
  return std::chrono::sys_days(date) + time_of_day;
}

}  // namespace

TEST_CASE("shared credentials: profiles, comments, spacing and key case", "[brokers][aws]") {
  auto work = parse_shared_credentials(several_profiles, "work", "creds.ini");
  REQUIRE(work);
  CHECK(work->access_key_id.expose() == key_id_value);
  CHECK(work->secret_access_key.expose() == secret_value);
  CHECK(work->session_token.expose() == token_value);
  CHECK_FALSE(work->expiration);

  auto fallback = parse_shared_credentials(several_profiles, "default", "creds.ini");
  REQUIRE(fallback);
  CHECK(fallback->access_key_id.expose() == "AKIDDEFAULT");
  CHECK(fallback->secret_access_key.expose() == "default-secret");
  CHECK(fallback->session_token.empty());

  // "[profile NAME]" is the config file's spelling; ':' is configparser's other delimiter, and a
  // value keeps every '=' after the first delimiter.
  auto staging = parse_shared_credentials(several_profiles, "staging", "creds.ini");
  REQUIRE(staging);
  CHECK(staging->access_key_id.expose() == "AKIDSTAGING");
  CHECK(staging->secret_access_key.expose() == "staging/secret+with=equals");
}

TEST_CASE("shared credentials: a missing profile is nullopt", "[brokers][aws]") {
  CHECK_FALSE(parse_shared_credentials(several_profiles, "nope", "creds.ini"));
  CHECK_FALSE(parse_shared_credentials(several_profiles, "WORK", "creds.ini"));  // exact names
  CHECK_FALSE(parse_shared_credentials("", "default", "creds.ini"));
  CHECK_FALSE(parse_shared_credentials("# only a comment\n", "default", "creds.ini"));
}

TEST_CASE("shared credentials: a profile without a key names file, profile and key",
          "[brokers][aws]") {
  const std::string no_secret = "[default]\naws_access_key_id = " + std::string(key_id_value) +
                                "\n[other]\naws_secret_access_key = " + std::string(secret_value) +
                                "\n";
  std::string error = ini_error(no_secret);
  CHECK(error.find("creds.ini") != std::string::npos);
  CHECK(error.find("profile \"default\"") != std::string::npos);
  CHECK(error.find("no aws_secret_access_key") != std::string::npos);
  CHECK_FALSE(mentions_a_value(error));

  std::string no_key_id = ini_error(no_secret, "other");
  CHECK(no_key_id.find("profile \"other\"") != std::string::npos);
  CHECK(no_key_id.find("no aws_access_key_id") != std::string::npos);
  CHECK_FALSE(mentions_a_value(no_key_id));

  // An empty value is no value.
  CHECK(ini_error("[default]\naws_access_key_id = AKID\naws_secret_access_key =\n")
            .find("no aws_secret_access_key") != std::string::npos);
}

TEST_CASE("shared credentials: malformed lines name their line, never their text",
          "[brokers][aws]") {
  const std::string secret(secret_value);
  std::string error = ini_error("[default]\naws_access_key_id = AKID\n" + secret + "\n");
  CHECK(error.find("creds.ini, profile \"default\": line 3:") != std::string::npos);
  CHECK_FALSE(mentions_a_value(error));

  CHECK(ini_error("\n[default\n").find("line 2: a section without \"]\"") != std::string::npos);
  CHECK(ini_error("[default] x\n").find("line 1: text after") != std::string::npos);
  CHECK(ini_error("[ ]\n").find("line 1: a section without a name") != std::string::npos);
  CHECK(ini_error("[default]\n= " + secret + "\n").find("line 2: a value without a key") !=
        std::string::npos);
  CHECK(ini_error("aws_access_key_id = AKID\n[default]\n").find("line 1: a setting before") !=
        std::string::npos);
  // A malformed line in another profile still makes the file unreadable, as it does for the CLI.
  CHECK(ini_error("[default]\naws_access_key_id=a\naws_secret_access_key=b\n[x]\nbroken\n")
            .find("line 5") != std::string::npos);
  // A comment after a section header is allowed.
  CHECK(parse_shared_credentials("[default] # main\naws_access_key_id=a\naws_secret_access_key=b",
                                 "default", "creds.ini"));
}

TEST_CASE("shared credentials: a repeated key is an error", "[brokers][aws]") {
  std::string error = ini_error(
      "[default]\naws_access_key_id = AKID\naws_secret_access_key = " + std::string(secret_value) +
      "\nAWS_SECRET_ACCESS_KEY = " + std::string(secret_value) + "\n");
  CHECK(error.find("line 4: aws_secret_access_key appears twice") != std::string::npos);
  CHECK_FALSE(mentions_a_value(error));
}

TEST_CASE("shared credentials: indented settings under an empty key are skipped",
          "[brokers][aws]") {
  auto credentials = parse_shared_credentials(
      "[default]\ns3 =\n  max_concurrent_requests = 10\n  addressing_style\n"
      "aws_access_key_id = AKID\naws_secret_access_key = sec\n",
      "default", "creds.ini");
  REQUIRE(credentials);
  CHECK(credentials->access_key_id.expose() == "AKID");
}

TEST_CASE("file: source reads a profile, ~/ expanded, default profile \"default\"",
          "[brokers][aws]") {
  temp_dir tmp;
  std::filesystem::create_directories(tmp.path / ".aws");
  write_file(tmp.path / ".aws" / "credentials", several_profiles);
  scoped_env home("HOME", tmp.path.string());

  auto work = load_aws_credentials("file:~/.aws/credentials#work", {});
  REQUIRE(work);
  CHECK(work->secret_access_key.expose() == secret_value);
  CHECK(work->session_token.expose() == token_value);

  auto fallback = load_aws_credentials("file:" + (tmp.path / ".aws/credentials").string(), {});
  REQUIRE(fallback);
  CHECK(fallback->access_key_id.expose() == "AKIDDEFAULT");

  auto staging = load_aws_credentials("file:~/.aws/credentials# staging ", {});
  REQUIRE(staging);
  CHECK(staging->access_key_id.expose() == "AKIDSTAGING");
}

TEST_CASE("file: source: missing file is absent, missing profile or bad line is an error",
          "[brokers][aws]") {
  temp_dir tmp;
  CHECK_FALSE(load_aws_credentials("file:" + (tmp.path / "nope").string(), {}));
  CHECK_FALSE(load_aws_credentials("file:" + (tmp.path / "nope").string() + "#work", {}));

  const std::string path = (tmp.path / "credentials").string();
  write_file(tmp.path / "credentials", several_profiles);
  std::string missing = load_error("file:" + path + "#absent");
  CHECK(missing.find("file:" + path) != std::string::npos);
  CHECK(missing.find("no profile \"absent\"") != std::string::npos);

  // Line numbers count the file's leading blank lines too.
  write_file(tmp.path / "credentials",
             "\n\n[default]\naws_access_key_id = AKID\n" + std::string(secret_value) + "\n");
  std::string bad = load_error("file:" + path);
  CHECK(bad.find("file:" + path + ", profile \"default\": line 5:") != std::string::npos);
  CHECK_FALSE(mentions_a_value(bad));

  // An existing empty file has no profiles.
  write_file(tmp.path / "credentials", "");
  CHECK(load_error("file:" + path).find("no profile \"default\"") != std::string::npos);

  CHECK(load_error("file:" + path + "#").find("profile after '#' is empty") != std::string::npos);
  CHECK(load_error("file:relative/credentials").find("must be absolute") != std::string::npos);
}

TEST_CASE("env: source reads the three variables", "[brokers][aws]") {
  scoped_env id("AWS_ACCESS_KEY_ID", std::string(key_id_value));
  scoped_env key("AWS_SECRET_ACCESS_KEY", std::string(secret_value));
  scoped_env token("AWS_SESSION_TOKEN", std::nullopt);

  auto credentials = load_aws_credentials("env:AWS", {});
  REQUIRE(credentials);
  CHECK(credentials->access_key_id.expose() == key_id_value);
  CHECK(credentials->secret_access_key.expose() == secret_value);
  CHECK(credentials->session_token.empty());
  CHECK_FALSE(credentials->expiration);

  scoped_env with_token("AWS_SESSION_TOKEN", std::string(token_value));
  credentials = load_aws_credentials("env:AWS", {});
  REQUIRE(credentials);
  CHECK(credentials->session_token.expose() == token_value);
}

TEST_CASE("env: source with its own variable names", "[brokers][aws]") {
  scoped_env id("BROKER_TEST_AK", "AKIDCUSTOM");
  scoped_env key("BROKER_TEST_SK", std::string(secret_value));
  scoped_env token("BROKER_TEST_ST", std::string(token_value));
  auto credentials =
      load_aws_credentials("env:custom", {"BROKER_TEST_AK", "BROKER_TEST_SK", "BROKER_TEST_ST"});
  REQUIRE(credentials);
  CHECK(credentials->access_key_id.expose() == "AKIDCUSTOM");
  CHECK(credentials->session_token.expose() == token_value);

  // A missing or empty entry takes its default name.
  scoped_env default_token("AWS_SESSION_TOKEN", "default-token");
  credentials = load_aws_credentials("env:custom", {"BROKER_TEST_AK", "BROKER_TEST_SK", ""});
  REQUIRE(credentials);
  CHECK(credentials->session_token.expose() == "default-token");
  credentials = load_aws_credentials("env:custom", {"BROKER_TEST_AK", "BROKER_TEST_SK"});
  REQUIRE(credentials);
  CHECK(credentials->session_token.expose() == "default-token");
}

TEST_CASE("env: source: both unset is absent, only one set is an error", "[brokers][aws]") {
  scoped_env id("BROKER_TEST_AK", std::nullopt);
  scoped_env key("BROKER_TEST_SK", std::nullopt);
  scoped_env empty("BROKER_TEST_ST", "");
  const std::vector<std::string> names = {"BROKER_TEST_AK", "BROKER_TEST_SK", "BROKER_TEST_ST"};
  CHECK_FALSE(load_aws_credentials("env:custom", names));

  {
    scoped_env only_id("BROKER_TEST_AK", std::string(key_id_value));
    std::string error = source_error_of([&] { return load_aws_credentials("env:custom", names); });
    CHECK(error.find("env:custom") != std::string::npos);
    CHECK(error.find("BROKER_TEST_AK is set but BROKER_TEST_SK is not") != std::string::npos);
    CHECK_FALSE(mentions_a_value(error));
  }
  {
    scoped_env only_secret("BROKER_TEST_SK", std::string(secret_value));
    scoped_env empty_id("BROKER_TEST_AK", "");
    std::string error = source_error_of([&] { return load_aws_credentials("env:custom", names); });
    CHECK(error.find("BROKER_TEST_SK is set but BROKER_TEST_AK is not") != std::string::npos);
    CHECK_FALSE(mentions_a_value(error));
  }
}

TEST_CASE("cmd: source parses process credentials", "[brokers][aws]") {
  auto credentials = load_aws_credentials(
      "cmd:printf '%s\\n' '{\"Version\": 1, \"AccessKeyId\": \"" + std::string(key_id_value) +
          "\", \"SecretAccessKey\": \"" + std::string(secret_value) + "\", \"SessionToken\": \"" +
          std::string(token_value) + "\", \"Expiration\": \"2026-11-30T12:00:00Z\"}'",
      {});
  REQUIRE(credentials);
  CHECK(credentials->access_key_id.expose() == key_id_value);
  CHECK(credentials->secret_access_key.expose() == secret_value);
  CHECK(credentials->session_token.expose() == token_value);
  REQUIRE(credentials->expiration);
  CHECK(*credentials->expiration == utc(std::chrono::year(2026) / 11 / 30, 12h));

  // SessionToken and Expiration are optional.
  credentials = load_aws_credentials(
      "cmd:printf '%s' '{\"Version\":1,\"AccessKeyId\":\"AKID\",\"SecretAccessKey\":\"sk\"}'", {});
  REQUIRE(credentials);
  CHECK(credentials->session_token.empty());
  CHECK_FALSE(credentials->expiration);
}

TEST_CASE("cmd: source errors name the command and the problem, never a value", "[brokers][aws]") {
  const std::string key = std::string(key_id_value);
  const std::string secret = std::string(secret_value);
  auto command = [](const std::string& json) { return "cmd:printf '%s' '" + json + "'"; };

  std::string bad_json = load_error(command("{\"Version\": 1, \"AccessKeyId\": \"" + key +
                                            "\", \"SecretAccessKey\": \"" + secret + "\""));
  CHECK(bad_json.find("cmd:printf") != std::string::npos);
  CHECK(bad_json.find("process credentials: not valid JSON") != std::string::npos);
  // The command's own text holds the values here; only what follows it must not.
  CHECK_FALSE(mentions_a_value(bad_json.substr(bad_json.find("process credentials"))));

  std::string broken =
      source_error_of([&] { return parse_process_credentials("{\"x\": \"" + secret); });
  CHECK(broken.find("not valid JSON") != std::string::npos);
  CHECK_FALSE(mentions_a_value(broken));

  std::string version = load_error(command("{\"Version\": 2, \"AccessKeyId\": \"" + key +
                                           "\", \"SecretAccessKey\": \"" + secret + "\"}"));
  CHECK(version.find("\"Version\" 2 is not supported") != std::string::npos);

  std::string missing = source_error_of([&] {
    return parse_process_credentials("{\"Version\":1,\"AccessKeyId\":\"" + key +
                                     "\",\"SessionToken\":\"" + std::string(token_value) + "\"}");
  });
  CHECK(missing == "process credentials: \"SecretAccessKey\" is missing");

  CHECK(load_error("cmd:printf '[1]'").find("not a JSON object") != std::string::npos);
  CHECK(load_error("cmd:exit 4").find("status 4") != std::string::npos);
  CHECK(load_error("cmd:true").find("printed nothing") != std::string::npos);
}

TEST_CASE("process credentials: field types and Version are checked", "[brokers][aws]") {
  auto error = [](const std::string& json) {
    return source_error_of([&] { return parse_process_credentials(json); });
  };
  const std::string pair =
      ",\"AccessKeyId\":\"AKID\",\"SecretAccessKey\":\"" + std::string(secret_value) + "\"";
  CHECK(error("{" + pair.substr(1) + "}") == "process credentials: \"Version\" is missing");
  CHECK(error("{\"Version\":\"1\"" + pair + "}").find("not a number") != std::string::npos);
  CHECK(error("{\"Version\":1.5" + pair + "}").find("not a number") != std::string::npos);
  CHECK(error("{\"Version\":1,\"AccessKeyId\":\"\",\"SecretAccessKey\":\"s\"}")
            .find("\"AccessKeyId\" is missing") != std::string::npos);
  CHECK(error("{\"Version\":1,\"AccessKeyId\":5,\"SecretAccessKey\":\"s\"}")
            .find("\"AccessKeyId\" is not a string") != std::string::npos);
  std::string bad_date = error("{\"Version\":1" + pair + ",\"Expiration\":\"tomorrow\"}");
  CHECK(bad_date.find("\"Expiration\" is not an RFC 3339 date-time") != std::string::npos);
  CHECK_FALSE(mentions_a_value(bad_date));

  auto with_null = parse_process_credentials("{\"Version\":1" + pair +
                                             ",\"SessionToken\":null,\"Expiration\":null}");
  CHECK(with_null.session_token.empty());
  CHECK_FALSE(with_null.expiration);
}

TEST_CASE("RFC 3339 expirations: fractions and offsets", "[brokers][aws]") {
  using std::chrono::year;
  const auto noon = utc(year(2026) / 11 / 30, 12h);
  CHECK(parse_rfc3339("2026-11-30T12:00:00Z") == noon);
  CHECK(parse_rfc3339("2026-11-30T12:00:00+00:00") == noon);
  CHECK(parse_rfc3339("2026-11-30t12:00:00z") == noon);
  CHECK(parse_rfc3339("2026-11-30T14:30:00+02:30") == noon);
  CHECK(parse_rfc3339("2026-11-30T07:00:00-05:00") == noon);
  CHECK(parse_rfc3339("2026-11-30T12:00:00.250Z") == noon + 250ms);
  CHECK(parse_rfc3339("2026-11-30T12:00:00.123456789123+00:00") == noon + 123456789ns);
  CHECK(parse_rfc3339("2024-02-29T00:00:00Z") == utc(year(2024) / 2 / 29, 0s));

  CHECK_FALSE(parse_rfc3339("2026-11-30T12:00:00"));  // no offset
  CHECK_FALSE(parse_rfc3339("2026-11-30T12:00:00.Z"));
  CHECK_FALSE(parse_rfc3339("2026-11-30T12:00Z"));
  CHECK_FALSE(parse_rfc3339("2026-02-30T12:00:00Z"));
  CHECK_FALSE(parse_rfc3339("2026-11-30T24:00:00Z"));
  CHECK_FALSE(parse_rfc3339("2026-11-30T12:00:00Z "));
  CHECK_FALSE(parse_rfc3339("2026-11-30T12:00:00+0000"));
  CHECK_FALSE(parse_rfc3339(""));
}

TEST_CASE("an unknown AWS credential source is an error", "[brokers][aws]") {
  CHECK(load_error("vault:aws").find("unknown source") != std::string::npos);
}
