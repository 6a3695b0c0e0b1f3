#include "capture/dns_responder.hpp"

#include <catch2/catch.hpp>

#include "capture/dns_message.hpp"
#include "config/policy.hpp"

using namespace broker::capture;
using broker::config::ip_address;

namespace {

broker::config::policy_set policy(const char* text) {
  std::vector<broker::config::policy> layers;
  layers.push_back(broker::config::parse_policy(text, "p.json"));
  return broker::config::policy_set(std::move(layers));
}

synthetic_addresses ranges() {
  return synthetic_addresses(*ip_address::parse("198.18.0.0"),
                             *ip_address::parse("fd62:726b:7200::"));
}

// A query as a stub resolver sends it: id 0x1234, RD, one question of class IN.
std::string query(const std::string& name, std::uint16_t type, std::uint8_t opcode = 0) {
  std::string wire{'\x12', '\x34', static_cast<char>(0x01 | (opcode << 3)),
                   '\x00', '\x00', '\x01',
                   '\x00', '\x00', '\x00',
                   '\x00', '\x00', '\x00'};
  wire += *dns::encode_name(name);
  wire.push_back(static_cast<char>(type >> 8));
  wire.push_back(static_cast<char>(type & 0xff));
  wire += std::string("\x00\x01", 2);
  return wire;
}

int rcode_of(const std::string& response) {
  REQUIRE(response.size() >= 12);
  return static_cast<unsigned char>(response[3]) & 0x0f;
}

int answer_count(const std::string& response) {
  return static_cast<unsigned char>(response[6]) << 8 | static_cast<unsigned char>(response[7]);
}

// The rdata of the last answer (the tests' answers are the last bytes of the message).
std::string last_rdata(const std::string& response, std::size_t length) {
  return response.substr(response.size() - length);
}

const char* team_policy = R"({"allow": [{"host": "api.github.com"}, {"host": "*.example.com"}]})";

}  // namespace

TEST_CASE("an allowed name answers with its synthetic addresses", "[dns]") {
  auto set = policy(team_policy);
  auto names = ranges();
  auto a = answer_dns(query("API.GitHub.com", dns::type::a), false, set, names);
  CHECK_FALSE(a.refused);
  CHECK(a.response.substr(0, 2) == "\x12\x34");
  CHECK(rcode_of(a.response) == 0);
  REQUIRE(answer_count(a.response) == 1);
  CHECK(last_rdata(a.response, 4) == std::string("\xc6\x12\x00\x02", 4));  // 198.18.0.2

  auto aaaa = answer_dns(query("api.github.com", dns::type::aaaa), false, set, names);
  REQUIRE(answer_count(aaaa.response) == 1);
  CHECK(last_rdata(aaaa.response, 16) ==
        std::string("\xfd\x62\x72\x6b\x72\x00\0\0\0\0\0\0\0\0\0\x02", 16));
  CHECK(names.name_of(*ip_address::parse("198.18.0.2")) == "api.github.com");

  // Other types for an allowed name: no records, no error (HTTPS records are asked for first by
  // some clients).
  auto https = answer_dns(query("x.example.com", dns::type::https), false, set, names);
  CHECK(rcode_of(https.response) == 0);
  CHECK(answer_count(https.response) == 0);
  CHECK_FALSE(https.refused);
}

TEST_CASE("a refused name gets NXDOMAIN and is reported for the audit log", "[dns]") {
  auto set = policy(team_policy);
  auto names = ranges();
  auto r =
      answer_dns(query("c2VjcmV0LWRhdGE.exfil.attacker.test", dns::type::txt), false, set, names);
  CHECK(rcode_of(r.response) == 3);
  CHECK(answer_count(r.response) == 0);
  REQUIRE(r.refused);
  CHECK(r.refused->name == "c2vjcmv0lwrhdge.exfil.attacker.test");
  CHECK(r.refused->type == "TXT");
  CHECK(r.refused->rule == "default_deny");
  // Nothing was handed out for it.
  CHECK_FALSE(names.name_of(*ip_address::parse("198.18.0.2")));
}

TEST_CASE("localhost, reverse names, malformed and unsupported queries", "[dns]") {
  auto set = policy(team_policy);
  auto names = ranges();
  auto local = answer_dns(query("localhost", dns::type::a), false, set, names);
  REQUIRE(answer_count(local.response) == 1);
  CHECK(last_rdata(local.response, 4) == std::string("\x7f\0\0\x01", 4));
  CHECK_FALSE(local.refused);

  answer_dns(query("api.github.com", dns::type::a), false, set, names);
  auto ptr = answer_dns(query("2.0.18.198.in-addr.arpa", dns::type::ptr), false, set, names);
  CHECK(rcode_of(ptr.response) == 0);
  REQUIRE(answer_count(ptr.response) == 1);
  CHECK(last_rdata(ptr.response, 16) == *dns::encode_name("api.github.com"));
  auto unknown_ptr =
      answer_dns(query("9.0.18.198.in-addr.arpa", dns::type::ptr), false, set, names);
  CHECK(rcode_of(unknown_ptr.response) == 3);

  CHECK(
      rcode_of(answer_dns(query("api.github.com", dns::type::a, 2), false, set, names).response) ==
      4);  // STATUS: NOTIMP
  auto garbage = answer_dns(std::string("\xab\xcd\x01\x00\x00\x05", 6), false, set, names);
  CHECK(garbage.response.empty());  // not even a header: nothing to answer
  auto response = query("a.example.com", dns::type::a);
  response[2] = static_cast<char>(response[2] | 0x80);  // QR: an answer, sent back at us
  CHECK(answer_dns(response, false, set, names).response.empty());
  auto no_question = query("a.example.com", dns::type::a).substr(0, 12) + "\x07";
  auto formerr = answer_dns(no_question, false, set, names);
  CHECK(rcode_of(formerr.response) == 1);
}
