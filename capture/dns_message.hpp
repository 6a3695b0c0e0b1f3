// DNS messages (RFC 1035 §4, EDNS per RFC 6891) for the broker's in-namespace DNS responder: the
// child's queries read off the wire and the broker's answers written back. Pure byte handling, no
// sockets (the fuzz project builds it): every input is bounded by its buffer, nothing throws, and
// compression pointers are followed only backwards and a bounded number of times.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace broker::capture::dns {

namespace type {
constexpr std::uint16_t a = 1, ns = 2, cname = 5, soa = 6, ptr = 12, mx = 15, txt = 16, aaaa = 28,
                        srv = 33, opt = 41, svcb = 64, https = 65, any = 255;
}  // namespace type

constexpr std::uint16_t class_in = 1;

// Codes above 15 are extended (RFC 6891 §6.1.3): their upper 8 bits travel in the OPT record, so
// they can be sent only to a query that had EDNS; without it they go out as SERVFAIL.
enum class rcode : std::uint8_t {
  noerror = 0,
  formerr = 1,
  servfail = 2,
  nxdomain = 3,
  notimp = 4,
  refused = 5,
  badvers = 16,  // the query's EDNS version is not 0, the only one there is
};

struct question {
  // Presentation form: labels joined by '.', no trailing dot ("" = the root), ASCII upper-case
  // folded to lower-case; any byte inside a label that is not [a-z0-9-_] (including '.', '\\',
  // spaces, non-ASCII and control bytes) written as \DDD, three decimal digits, as dig prints it.
  // So two names that DNS holds equal (RFC 4343) have one form, and no label can pass for two.
  std::string name;
  std::uint16_t qtype = 0;
  std::uint16_t qclass = 0;
};

struct query {
  std::uint16_t id = 0;
  bool recursion_desired = false;
  bool checking_disabled = false;
  // Not checked by parse_query: the caller answers NOTIMP to anything but 0 (QUERY).
  std::uint8_t opcode = 0;
  question q;  // exactly one question
  // The question's name as the client wrote it (uncompressed wire form, case kept): the answer's
  // question echoes it while it still spells q.name, for the clients that randomize a name's case
  // and check it comes back (DNS 0x20, draft-vixie-dnsext-dns0x20).
  std::string asked_name;
  bool edns = false;                // an OPT record in the additional section
  std::uint16_t udp_payload = 512;  // EDNS's advertised size (clamped to >= 512), 512 without EDNS
  std::uint8_t edns_version = 0;    // the caller answers rcode::badvers when it is not 0
};

// Why a message is not a query we answer. When at least the 12-byte header was read, `id` and
// `opcode` are filled so the caller can answer FORMERR or NOTIMP with build_header_only, except
// when `is_response`: a response is never answered (two responders would answer each other).
struct parse_failure {
  std::string reason;
  std::optional<std::uint16_t> id;
  std::uint8_t opcode = 0;
  bool header_read = false;
  bool is_response = false;  // QR=1
};

// A query: QR=0, QDCOUNT=1, ANCOUNT=0, NSCOUNT=0, ARCOUNT 0 or 1 (an OPT record: root name, type
// 41, well-formed options), nothing after it. Names: total length <= 255 octets, labels <= 63
// (RFC 1035 §2.3.4); a compression pointer must point before the labels it ends (BIND's rule, so
// every jump goes further back and none can loop), at most 127 of them in a name. Anything else
// is a parse_failure with its reason.
std::variant<query, parse_failure> parse_query(std::string_view wire);

// A resource record of the answer section. `rdata` is as on the wire: 4 bytes for A, 16 for AAAA,
// an encoded name (encode_name) for PTR and CNAME. Written with class IN.
struct record {
  std::uint16_t type = 0;
  std::uint32_t ttl = 0;
  std::string rdata;
};

// Our advertised EDNS UDP payload: the DNS Flag Day 2020 size, which fits an IPv6 minimum MTU.
constexpr std::uint16_t response_udp_payload = 1232;
// What a DNS message over TCP may hold (its 2-byte length prefix, RFC 1035 §4.2.2).
constexpr std::size_t max_tcp_message = 65535;

// The answer to `q`: same id and opcode, QR=1, AA=1, RA=1 (we are the child's resolver), RD and CD
// copied, the question re-encoded from q.q (in q.asked_name's case), the answers with owner name
// the question's (pointer 0xC00C), and an OPT record (udp payload 1232, no options) when the query
// had EDNS. When the message would exceed `max_size` (q.udp_payload over UDP, max_tcp_message over
// TCP) every answer is dropped and TC=1 set (RFC 2181 §9: an RRset goes whole or not at all).
// `max_size` is taken as at least 512 (every client takes that, RFC 1035 §4.2.1), which question
// and OPT always fit, and at most 65535. A question name that does not encode (only a hand-made
// query has one) leaves the message with no question and no answers.
std::string build_response(const query& q, rcode code, const std::vector<record>& answers,
                           std::size_t max_size);

// The answer to a message that could not be parsed but whose header was read (FORMERR, NOTIMP):
// the header only, QR=1, RA=1, every count 0.
std::string build_header_only(std::uint16_t id, std::uint8_t opcode, rcode code);

// Presentation name -> wire: the inverse of question::name. \DDD and \X (X not a digit, RFC 1035
// §5.1) are understood, other bytes are taken as they are (case kept); one trailing dot is
// allowed ("." and "" are both the root). nullopt when a label is over 63 octets, the name over
// 255, a label empty, or an escape malformed.
std::optional<std::string> encode_name(std::string_view name);

// PTR query names: "4.3.2.1.in-addr.arpa" (IPv4 as ::ffff:1.2.3.4) and the 32-nibble ip6.arpa
// form (RFC 3596 §2.5), in question::name form. nullopt when the name is not a whole address's
// reverse name (a shorter one names a zone, not an address).
std::optional<std::array<std::uint8_t, 16>> reverse_name_address(std::string_view name);
// The inverse: an IPv4-mapped address gives its in-addr.arpa name, any other its ip6.arpa one.
std::string reverse_name(const std::array<std::uint8_t, 16>& address);

// "A", "AAAA", "TXT", ... for audit records; "TYPE123" for one without a mnemonic here (the
// RFC 3597 form).
std::string type_name(std::uint16_t type);

}  // namespace broker::capture::dns
