// DNS messages as the child's resolvers send them and as a client reads the broker's answers:
// queries built byte by byte the way dig and glibc write them, every malformed form refused with
// the header kept for a FORMERR, and responses decoded here independently of the encoder.
#include "capture/dns_message.hpp"

#include <catch2/catch.hpp>

#include <cctype>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace dns = broker::capture::dns;

namespace {

std::string u16(std::uint16_t v) {
  return {static_cast<char>(v >> 8), static_cast<char>(v & 0xFF)};
}

std::string u32(std::uint32_t v) {
  return u16(static_cast<std::uint16_t>(v >> 16)) + u16(static_cast<std::uint16_t>(v));
}

std::string header(std::uint16_t id, std::uint16_t flags, std::uint16_t qd = 1,
                   std::uint16_t an = 0, std::uint16_t ns = 0, std::uint16_t ar = 0) {
  return u16(id) + u16(flags) + u16(qd) + u16(an) + u16(ns) + u16(ar);
}

std::string labels(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (auto part : parts) out += static_cast<char>(part.size()) + std::string(part);
  return out + '\0';
}

std::string opt_record(std::uint16_t payload, std::uint32_t ttl = 0, std::string options = "") {
  return '\0' + u16(dns::type::opt) + u16(payload) + u32(ttl) +
         u16(static_cast<std::uint16_t>(options.size())) + options;
}

constexpr std::uint16_t rd = 0x0100, ad = 0x0020, cd = 0x0010;

// `dig api.github.com`: RD and AD set, EDNS with a 1232-byte payload and a client cookie.
std::string dig_query() {
  const std::string cookie = u16(10) + u16(8) + "\x8d\x1f\x3b\x22\x09\xa4\x6e\x51";
  return header(0x4a7c, rd | ad, 1, 0, 0, 1) + labels({"api", "github", "com"}) +
         u16(dns::type::a) + u16(dns::class_in) + opt_record(1232, 0, cookie);
}

// glibc's stub resolver: RD only, no EDNS.
std::string glibc_aaaa_query(std::string_view name_wire) {
  return header(0x1234, rd) + std::string(name_wire) + u16(dns::type::aaaa) + u16(dns::class_in);
}

dns::query parsed(std::string_view wire) {
  auto result = dns::parse_query(wire);
  if (auto* failure = std::get_if<dns::parse_failure>(&result)) FAIL(failure->reason);
  return std::get<dns::query>(result);
}

dns::parse_failure refused(std::string_view wire) {
  auto result = dns::parse_query(wire);
  REQUIRE(std::holds_alternative<dns::parse_failure>(result));
  return std::get<dns::parse_failure>(result);
}

// A response as a client reads it: our messages put only pointers (answers) or the root (OPT)
// before a record's type, so that is all this reader follows.
struct decoded_record {
  std::uint16_t owner = 0;  // the 2-byte pointer, or 0 for the root
  std::uint16_t type = 0, klass = 0;
  std::uint32_t ttl = 0;
  std::string rdata;
};

struct decoded {
  std::uint16_t id = 0, flags = 0, qdcount = 0, ancount = 0, nscount = 0, arcount = 0;
  std::string question;  // the question section's bytes
  std::vector<decoded_record> answers, additional;

  bool qr() const { return flags & 0x8000; }
  int opcode() const { return (flags >> 11) & 0x0F; }
  bool aa() const { return flags & 0x0400; }
  bool tc() const { return flags & 0x0200; }
  bool rd() const { return flags & 0x0100; }
  bool ra() const { return flags & 0x0080; }
  bool cd() const { return flags & 0x0010; }
  int rcode() const { return flags & 0x0F; }
};

decoded decode(std::string_view wire) {
  decoded d;
  std::size_t at = 0;
  const auto take16 = [&] {
    REQUIRE(at + 2 <= wire.size());
    const auto v = static_cast<std::uint16_t>(static_cast<std::uint8_t>(wire[at]) << 8 |
                                              static_cast<std::uint8_t>(wire[at + 1]));
    at += 2;
    return v;
  };
  d.id = take16();
  d.flags = take16();
  d.qdcount = take16();
  d.ancount = take16();
  d.nscount = take16();
  d.arcount = take16();
  const std::size_t question_start = at;
  for (int i = 0; i < d.qdcount; ++i) {
    while (true) {
      REQUIRE(at < wire.size());
      const auto length = static_cast<std::uint8_t>(wire[at++]);
      if (length == 0) break;
      REQUIRE(length <= 63);
      at += length;
    }
    at += 4;
  }
  REQUIRE(at <= wire.size());
  d.question = std::string(wire.substr(question_start, at - question_start));
  const auto take_record = [&] {
    decoded_record r;
    REQUIRE(at < wire.size());
    if (wire[at] == '\0')
      ++at;
    else
      r.owner = take16();
    r.type = take16();
    r.klass = take16();
    r.ttl = std::uint32_t{take16()} << 16;
    r.ttl |= take16();
    const std::size_t length = take16();
    REQUIRE(at + length <= wire.size());
    r.rdata = std::string(wire.substr(at, length));
    at += length;
    return r;
  };
  for (int i = 0; i < d.ancount; ++i) d.answers.push_back(take_record());
  for (int i = 0; i < d.arcount; ++i) d.additional.push_back(take_record());
  CHECK(at == wire.size());
  return d;
}

dns::record a_record(std::uint8_t last, std::uint32_t ttl = 60) {
  return {dns::type::a, ttl, std::string("\x0a\x00\x00", 3) + static_cast<char>(last)};
}

}  // namespace

TEST_CASE("dns: an A query as dig sends it", "[dns]") {
  const auto q = parsed(dig_query());
  CHECK(q.id == 0x4a7c);
  CHECK(q.recursion_desired);
  CHECK_FALSE(q.checking_disabled);
  CHECK(q.opcode == 0);
  CHECK(q.q.name == "api.github.com");
  CHECK(q.q.qtype == dns::type::a);
  CHECK(q.q.qclass == dns::class_in);
  CHECK(q.edns);
  CHECK(q.udp_payload == 1232);
  CHECK(q.edns_version == 0);
}

TEST_CASE("dns: an AAAA query as glibc sends it, without EDNS", "[dns]") {
  const auto q = parsed(glibc_aaaa_query(labels({"pypi", "org"})));
  CHECK(q.id == 0x1234);
  CHECK(q.q.name == "pypi.org");
  CHECK(q.q.qtype == dns::type::aaaa);
  CHECK_FALSE(q.edns);
  CHECK(q.udp_payload == 512);

  // CD is read; a name may be the root.
  const auto root = parsed(header(7, cd) + std::string(1, '\0') + u16(dns::type::ns) + u16(1));
  CHECK(root.checking_disabled);
  CHECK_FALSE(root.recursion_desired);
  CHECK(root.q.name == "");
}

TEST_CASE("dns: names are folded to lower case and odd bytes escaped as \\DDD", "[dns]") {
  CHECK(parsed(glibc_aaaa_query(labels({"API", "GitHub", "COM"}))).q.name == "api.github.com");
  CHECK(parsed(glibc_aaaa_query(labels({"_443", "_https", "x-y", "09"}))).q.name ==
        "_443._https.x-y.09");

  // One label holding a dot, a space, 0xff, a backslash and an upper-case letter: it cannot be
  // mistaken for two labels, and encode_name gives the label back (folded).
  const std::string odd = std::string("a.b c\xff\\Z", 8);
  const auto q = parsed(glibc_aaaa_query(labels({odd, "example"})));
  CHECK(q.q.name == "a\\046b\\032c\\255\\092z.example");
  CHECK(dns::encode_name(q.q.name) == labels({std::string("a.b c\xff\\z", 8), "example"}));
  // Control bytes, NUL, '*' and non-ASCII as well.
  CHECK(parsed(glibc_aaaa_query(labels({std::string("\x00\x1f*\x80", 4)}))).q.name ==
        "\\000\\031\\042\\128");
}

TEST_CASE("dns: compression pointers in a query go only backwards", "[dns]") {
  // The question's name "www" then a pointer to offset 4, QDCOUNT's high byte, which reads as
  // the root: legal, if odd.
  const std::string back = header(1, rd) + "\x03www\xc0\x04" + u16(1) + u16(1);
  CHECK(parsed(back).q.name == "www");

  // An OPT record whose root name is a pointer to the question name's final zero byte.
  const std::string qname = labels({"example", "com"});
  const auto zero_at = static_cast<char>(12 + qname.size() - 1);
  const std::string opt_by_pointer = header(2, rd, 1, 0, 0, 1) + qname + u16(1) + u16(1) + "\xc0" +
                                     zero_at + opt_record(4096).substr(1);
  const auto q = parsed(opt_by_pointer);
  CHECK(q.q.name == "example.com");
  CHECK(q.edns);
  CHECK(q.udp_payload == 4096);

  // Forward, to itself, into the labels it ends (a loop), and a pointer cut off.
  const auto reason = [](std::string name_bytes) {
    return refused(header(3, rd) + name_bytes + u16(1) + u16(1)).reason;
  };
  CHECK(reason("\x03www\xc0\x20") ==
        "the question: a compression pointer that does not point back");
  CHECK(reason("\xc0\x0c") == "the question: a compression pointer that does not point back");
  CHECK(reason("\001a\xc0\x0c") == "the question: a compression pointer that does not point back");
  // A pointer to a pointer, each jump further back: the OPT owner points at the question's
  // pointer, which points at the root in the header.
  const std::string chain = header(4, rd, 1, 0, 0, 1) + "\x03www\xc0\x04" + u16(1) + u16(1) +
                            "\xc0\x10" + opt_record(1232).substr(1);
  CHECK(parsed(chain).edns);
  const auto cut = refused(header(5, rd) + "\x03www\xc0");
  CHECK(cut.reason == "the question: a compression pointer runs past the end");
  CHECK(cut.id == 5);
}

TEST_CASE("dns: a query cut at any byte is refused, with the header when it was read", "[dns]") {
  for (const std::string& wire : {dig_query(), glibc_aaaa_query(labels({"a", "b"}))}) {
    for (std::size_t size = 0; size < wire.size(); ++size) {
      const auto failure = refused(std::string_view(wire).substr(0, size));
      CHECK_FALSE(failure.reason.empty());
      CHECK(failure.header_read == (size >= 12));
      CHECK(failure.id.has_value() == (size >= 12));
    }
    CHECK(std::holds_alternative<dns::query>(dns::parse_query(wire)));
    // And one byte too many.
    CHECK(refused(wire + '\0').reason == "bytes after the message");
  }
}

TEST_CASE("dns: labels over 63 octets and names over 255 are refused", "[dns]") {
  const std::string l63(63, 'a'), l64(64, 'a');
  CHECK(parsed(glibc_aaaa_query(labels({l63, "com"}))).q.name == l63 + ".com");
  // A length byte of 64 has 0x40 set, a label type no longer in use.
  CHECK(refused(glibc_aaaa_query(labels({l64, "com"}))).reason ==
        "the question: an unknown label type");
  CHECK(refused(glibc_aaaa_query("\x80" + std::string(10, 'x'))).reason ==
        "the question: an unknown label type");

  // 3 x (1 + 63) + (1 + 61) + the root = 255 octets: the longest name; one more is too long.
  const auto longest = labels({l63, l63, l63, std::string(61, 'b')});
  REQUIRE(longest.size() == 255);
  CHECK(parsed(glibc_aaaa_query(longest)).q.name.size() == 253);
  CHECK(refused(glibc_aaaa_query(labels({l63, l63, l63, std::string(62, 'b')}))).reason ==
        "the question: a name over 255 octets");
  // The limit counts the labels a pointer brings in: an OPT owner of one 63-octet label and a
  // pointer to that 255-octet question name spells out 319.
  const std::string too_long = header(6, rd, 1, 0, 0, 1) + longest + u16(1) + u16(1) + '\x3f' +
                               l63 + "\xc0\x0c" + opt_record(1232).substr(1);
  CHECK(refused(too_long).reason == "the additional record: a name over 255 octets");
}

TEST_CASE("dns: messages that are not one plain question are refused", "[dns]") {
  const std::string question = labels({"example", "com"}) + u16(1) + u16(1);

  const auto response = refused(header(9, 0x8000 | rd) + question);
  CHECK(response.is_response);
  CHECK(response.reason == "a response, not a query");

  const auto two = refused(header(10, rd, 2) + question + question);
  CHECK(two.reason == "QDCOUNT 2, not 1");
  CHECK(two.header_read);
  CHECK(two.id == 10);
  CHECK_FALSE(two.is_response);
  CHECK(refused(header(11, rd, 0)).reason == "QDCOUNT 0, not 1");
  CHECK(refused(header(12, rd, 1, 1) + question).reason ==
        "answer or authority records in a query");
  CHECK(refused(header(13, rd, 1, 0, 1) + question).reason ==
        "answer or authority records in a query");
  CHECK(
      refused(header(14, rd, 1, 0, 0, 2) + question + opt_record(1232) + opt_record(1232)).reason ==
      "ARCOUNT 2, more than an OPT record");

  // An additional record that is not OPT (a TSIG), an OPT with a name, a bad option.
  const std::string tsig = labels({"key"}) + u16(250) + u16(255) + u32(0) + u16(0);
  CHECK(refused(header(15, rd, 1, 0, 0, 1) + question + tsig).reason ==
        "an additional record that is not OPT");
  const std::string named_opt = labels({"x"}) + opt_record(1232).substr(1);
  CHECK(refused(header(16, rd, 1, 0, 0, 1) + question + named_opt).reason ==
        "an OPT record whose name is not the root");
  CHECK(refused(header(17, rd, 1, 0, 0, 1) + question + opt_record(1232, 0, u16(10) + u16(8)))
            .reason == "a malformed EDNS option");

  // A STATUS (opcode 2) message: the opcode is kept for a NOTIMP.
  const auto status = refused(header(18, 2 << 11, 0));
  CHECK(status.opcode == 2);
  CHECK(status.header_read);
  // A NOTIFY shaped like a query parses; the caller sees its opcode.
  CHECK(parsed(header(19, 4 << 11) + question).opcode == 4);

  const auto short_one = refused("\x12\x34\x01");
  CHECK_FALSE(short_one.header_read);
  CHECK_FALSE(short_one.id);
}

TEST_CASE("dns: EDNS payload size and version", "[dns]") {
  const std::string question = labels({"example", "com"}) + u16(1) + u16(1);
  const auto small = parsed(header(1, rd, 1, 0, 0, 1) + question + opt_record(100));
  CHECK(small.udp_payload == 512);
  const auto v1 = parsed(header(2, rd, 1, 0, 0, 1) + question + opt_record(1232, 0x00010000));
  CHECK(v1.edns_version == 1);

  // BADVERS (16): 0 in the header's RCODE, 1 in the OPT TTL's top byte.
  const auto d = decode(dns::build_response(v1, dns::rcode::badvers, {}, v1.udp_payload));
  CHECK(d.rcode() == 0);
  REQUIRE(d.additional.size() == 1);
  CHECK(d.additional[0].ttl == 0x01000000);
  // Without EDNS there is nowhere to put it: SERVFAIL instead.
  dns::query plain = v1;
  plain.edns = false;
  const auto p = decode(dns::build_response(plain, dns::rcode::badvers, {}, 512));
  CHECK(p.rcode() == 2);
  CHECK(p.arcount == 0);
}

TEST_CASE("dns: an A response as a client reads it", "[dns]") {
  const std::string wire = dig_query();
  const auto q = parsed(wire);
  const auto d = decode(dns::build_response(q, dns::rcode::noerror,
                                            {a_record(1, 300), a_record(2, 300)}, q.udp_payload));
  CHECK(d.id == 0x4a7c);
  CHECK(d.qr());
  CHECK(d.opcode() == 0);
  CHECK(d.aa());
  CHECK_FALSE(d.tc());
  CHECK(d.rd());
  CHECK(d.ra());
  CHECK_FALSE(d.cd());
  CHECK(d.rcode() == 0);
  CHECK(d.qdcount == 1);
  CHECK(d.ancount == 2);
  CHECK(d.nscount == 0);
  CHECK(d.arcount == 1);
  // The question as it was asked.
  CHECK(d.question == labels({"api", "github", "com"}) + u16(1) + u16(1));
  REQUIRE(d.answers.size() == 2);
  for (const auto& answer : d.answers) {
    CHECK(answer.owner == 0xC00C);
    CHECK(answer.type == dns::type::a);
    CHECK(answer.klass == dns::class_in);
    CHECK(answer.ttl == 300);
  }
  CHECK(d.answers[0].rdata == std::string("\x0a\x00\x00\x01", 4));
  CHECK(d.answers[1].rdata == std::string("\x0a\x00\x00\x02", 4));
  // Our OPT: the root, 1232, no extended RCODE, version 0, no options.
  REQUIRE(d.additional.size() == 1);
  CHECK(d.additional[0].owner == 0);
  CHECK(d.additional[0].type == dns::type::opt);
  CHECK(d.additional[0].klass == 1232);
  CHECK(d.additional[0].ttl == 0);
  CHECK(d.additional[0].rdata.empty());
}

TEST_CASE("dns: the answer's question keeps the case the client asked in (DNS 0x20)", "[dns]") {
  const std::string asked = labels({"aPi", "GitHUB", "cOm"});
  auto q = parsed(glibc_aaaa_query(asked));
  CHECK(q.q.name == "api.github.com");
  CHECK(q.asked_name == asked);
  const auto d = decode(dns::build_response(q, dns::rcode::noerror, {}, 512));
  CHECK(d.question == asked + u16(dns::type::aaaa) + u16(dns::class_in));
  // A question name the caller changed is written as it now is.
  q.q.name = "pypi.org";
  const auto changed = decode(dns::build_response(q, dns::rcode::noerror, {}, 512));
  CHECK(changed.question == labels({"pypi", "org"}) + u16(dns::type::aaaa) + u16(dns::class_in));
}

TEST_CASE("dns: an AAAA response without EDNS, CD copied, and NXDOMAIN", "[dns]") {
  auto q = parsed(glibc_aaaa_query(labels({"pypi", "org"})));
  q.checking_disabled = true;
  const std::string v6("\x20\x01\x0d\xb8\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01", 16);
  const auto d = decode(
      dns::build_response(q, dns::rcode::noerror, {{dns::type::aaaa, 30, v6}}, q.udp_payload));
  CHECK(d.id == 0x1234);
  CHECK(d.cd());
  CHECK(d.rd());
  CHECK(d.arcount == 0);
  REQUIRE(d.answers.size() == 1);
  CHECK(d.answers[0].type == dns::type::aaaa);
  CHECK(d.answers[0].ttl == 30);
  CHECK(d.answers[0].rdata == v6);

  const auto nx = decode(dns::build_response(q, dns::rcode::nxdomain, {}, q.udp_payload));
  CHECK(nx.rcode() == 3);
  CHECK(nx.aa());
  CHECK(nx.qdcount == 1);
  CHECK(nx.ancount == 0);
  CHECK(nx.question == labels({"pypi", "org"}) + u16(dns::type::aaaa) + u16(1));

  // A PTR answer's RDATA is an encoded name.
  const auto ptr = dns::encode_name("localhost");
  REQUIRE(ptr);
  const auto pd =
      decode(dns::build_response(q, dns::rcode::noerror, {{dns::type::ptr, 0, *ptr}}, 512));
  REQUIRE(pd.answers.size() == 1);
  CHECK(pd.answers[0].rdata == labels({"localhost"}));
}

TEST_CASE("dns: answers that do not fit are dropped and TC set", "[dns]") {
  auto q = parsed(glibc_aaaa_query(labels({"many", "example"})));
  q.q.qtype = dns::type::a;
  // 12 + 18 (question) = 30 bytes before the answers, 16 per A record: 30 answers take 510.
  std::vector<dns::record> answers;
  for (int i = 0; i < 30; ++i) answers.push_back(a_record(static_cast<std::uint8_t>(i)));
  const std::string full = dns::build_response(q, dns::rcode::noerror, answers, 512);
  CHECK(full.size() == 510);
  CHECK_FALSE(decode(full).tc());
  CHECK(decode(full).ancount == 30);

  answers.push_back(a_record(30));
  const std::string cut = dns::build_response(q, dns::rcode::noerror, answers, q.udp_payload);
  CHECK(cut.size() <= 512);
  const auto d = decode(cut);
  CHECK(d.tc());
  CHECK(d.ancount == 0);
  CHECK(d.qdcount == 1);
  CHECK(d.rcode() == 0);

  // The same answers fit over TCP, and into an EDNS client's 1232 bytes.
  const auto tcp =
      decode(dns::build_response(q, dns::rcode::noerror, answers, dns::max_tcp_message));
  CHECK_FALSE(tcp.tc());
  CHECK(tcp.ancount == 31);
  q.edns = true;
  q.udp_payload = 1232;
  const auto edns = decode(dns::build_response(q, dns::rcode::noerror, answers, q.udp_payload));
  CHECK_FALSE(edns.tc());
  CHECK(edns.ancount == 31);
  CHECK(edns.arcount == 1);
  // A limit under 512 is taken as 512.
  CHECK(decode(dns::build_response(q, dns::rcode::noerror, {a_record(1)}, 0)).ancount == 1);
}

TEST_CASE("dns: FORMERR and NOTIMP are the header alone", "[dns]") {
  const auto failure = refused(header(0xbeef, rd, 2));
  REQUIRE(failure.id);
  const std::string formerr =
      dns::build_header_only(*failure.id, failure.opcode, dns::rcode::formerr);
  REQUIRE(formerr.size() == 12);
  const auto d = decode(formerr);
  CHECK(d.id == 0xbeef);
  CHECK(d.qr());
  CHECK(d.rcode() == 1);
  CHECK(d.opcode() == 0);
  CHECK(d.qdcount + d.ancount + d.nscount + d.arcount == 0);

  const auto notimp = decode(dns::build_header_only(0x0102, 5, dns::rcode::notimp));
  CHECK(notimp.opcode() == 5);
  CHECK(notimp.rcode() == 4);
}

TEST_CASE("dns: reverse names for PTR queries", "[dns]") {
  const auto v4 = dns::reverse_name_address("4.3.2.1.in-addr.arpa");
  REQUIRE(v4);
  CHECK(*v4 == std::array<std::uint8_t, 16>{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 1, 2, 3, 4});
  CHECK(dns::reverse_name(*v4) == "4.3.2.1.in-addr.arpa");
  CHECK(dns::reverse_name_address("255.0.0.10.in-addr.arpa"));

  // 2001:db8::567:89ab, as `dig -x` writes it.
  const std::string v6_name =
      "b.a.9.8.7.6.5.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa";
  const auto v6 = dns::reverse_name_address(v6_name);
  REQUIRE(v6);
  CHECK(*v6 == std::array<std::uint8_t, 16>{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0x05,
                                            0x67, 0x89, 0xab});
  CHECK(dns::reverse_name(*v6) == v6_name);
  // From a query on the wire, upper-case and all.
  std::string name_wire;
  for (char c : std::string_view(v6_name).substr(0, 63))
    if (c != '.') name_wire += std::string(1, '\x01') + static_cast<char>(std::toupper(c));
  name_wire += labels({"IP6", "ARPA"});
  CHECK(dns::reverse_name_address(parsed(glibc_aaaa_query(name_wire)).q.name) == v6);

  // Zones, not addresses, and names that only look like one.
  CHECK_FALSE(dns::reverse_name_address("3.2.1.in-addr.arpa"));
  CHECK_FALSE(dns::reverse_name_address("5.4.3.2.1.in-addr.arpa"));
  CHECK_FALSE(dns::reverse_name_address("256.3.2.1.in-addr.arpa"));
  CHECK_FALSE(dns::reverse_name_address("04.3.2.1.in-addr.arpa"));
  CHECK_FALSE(dns::reverse_name_address("4..2.1.in-addr.arpa"));
  CHECK_FALSE(dns::reverse_name_address("a.3.2.1.in-addr.arpa"));
  CHECK_FALSE(dns::reverse_name_address("in-addr.arpa"));
  CHECK_FALSE(dns::reverse_name_address("8.b.d.0.1.0.0.2.ip6.arpa"));
  CHECK_FALSE(dns::reverse_name_address("g" + v6_name.substr(1)));
  CHECK_FALSE(dns::reverse_name_address("ab" + v6_name.substr(2)));
  CHECK_FALSE(dns::reverse_name_address("api.github.com"));
}

TEST_CASE("dns: encode_name is the inverse of the question's name form", "[dns]") {
  for (std::string_view name :
       {"api.github.com", "a", "_dmarc.x-y.example", "\\000\\255.\\046", "a\\032b.c"}) {
    const auto wire = dns::encode_name(name);
    REQUIRE(wire);
    CHECK(parsed(glibc_aaaa_query(*wire)).q.name == name);
  }
  CHECK(dns::encode_name("") == std::string(1, '\0'));
  CHECK(dns::encode_name(".") == std::string(1, '\0'));
  CHECK(dns::encode_name("example.com.") == labels({"example", "com"}));
  CHECK(dns::encode_name("Example.COM") == labels({"Example", "COM"}));
  CHECK(dns::encode_name("a\\.b") == labels({"a.b"}));

  CHECK_FALSE(dns::encode_name("a..b"));
  CHECK_FALSE(dns::encode_name(".a"));
  CHECK_FALSE(dns::encode_name("a.."));
  CHECK_FALSE(dns::encode_name("a\\"));
  CHECK_FALSE(dns::encode_name("a\\25"));
  CHECK_FALSE(dns::encode_name("a\\256"));
  CHECK_FALSE(dns::encode_name("a\\2x5"));
  CHECK(dns::encode_name(std::string(63, 'a')));
  CHECK_FALSE(dns::encode_name(std::string(64, 'a')));
  // 63 escaped bytes are one 63-octet label.
  std::string escaped;
  for (int i = 0; i < 63; ++i) escaped += "\\046";
  CHECK(dns::encode_name(escaped));
  CHECK_FALSE(dns::encode_name(escaped + "a"));
  const std::string l63(63, 'a');
  CHECK(dns::encode_name(l63 + "." + l63 + "." + l63 + "." + std::string(61, 'b')));
  CHECK_FALSE(dns::encode_name(l63 + "." + l63 + "." + l63 + "." + std::string(62, 'b')));
}

TEST_CASE("dns: type names for audit records", "[dns]") {
  CHECK(dns::type_name(dns::type::a) == "A");
  CHECK(dns::type_name(dns::type::aaaa) == "AAAA");
  CHECK(dns::type_name(dns::type::https) == "HTTPS");
  CHECK(dns::type_name(dns::type::ptr) == "PTR");
  CHECK(dns::type_name(123) == "TYPE123");
}
