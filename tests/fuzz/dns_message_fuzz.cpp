// The DNS message layer (capture/dns_message.hpp) on the bytes a child could send its resolver:
// parse_query reads anything without reading past it, and a refusal keeps the header exactly
// when 12 bytes were there. For a query it accepts, the answer with two A records reads back as
// a client reads it (header bits, id, counts, the records, nothing after them), its question
// is the one asked, in the case asked, the question's name form encodes and parses back to
// itself, and answers that do not fit leave a truncated message within the limit. The input as
// presentation text goes through encode_name and reverse_name_address the same way.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "capture/dns_message.hpp"
#include "fuzz_support.hpp"

namespace {

using namespace broker;
namespace dns = capture::dns;
using fuzz::check;

std::uint16_t get16(std::string_view wire, std::size_t at) {
  return static_cast<std::uint16_t>(static_cast<std::uint8_t>(wire[at]) << 8 |
                                    static_cast<std::uint8_t>(wire[at + 1]));
}

std::string header(std::uint16_t id, std::uint16_t flags) {
  std::string out;
  for (std::uint16_t v :
       {id, flags, std::uint16_t{1}, std::uint16_t{0}, std::uint16_t{0}, std::uint16_t{0}}) {
    out += static_cast<char>(v >> 8);
    out += static_cast<char>(v & 0xFF);
  }
  return out;
}

// A query of `question_bytes` (name, type, class) alone, as a stub resolver would send it.
std::variant<dns::query, dns::parse_failure> reparse(std::string_view question_bytes) {
  return dns::parse_query(header(0x5151, 0x0100) + std::string(question_bytes));
}

void check_answer(const dns::query& q, const std::vector<dns::record>& answers) {
  const std::string wire = dns::build_response(q, dns::rcode::noerror, answers, q.udp_payload);
  check(wire.size() <= q.udp_payload, "a response over the client's UDP size");
  check(wire.size() >= 12, "a response shorter than a header");
  const std::uint16_t flags = get16(wire, 2);
  check(get16(wire, 0) == q.id, "the response's id is not the query's");
  check((flags & 0x8000) && (flags & 0x0400) && (flags & 0x0080), "QR, AA or RA not set");
  check(!(flags & 0x0200), "two A records truncated");
  check(((flags >> 11) & 0x0F) == q.opcode, "the opcode not copied");
  check(bool(flags & 0x0100) == q.recursion_desired, "RD not copied");
  check(bool(flags & 0x0010) == q.checking_disabled, "CD not copied");
  check((flags & 0x0F) == 0, "NOERROR not sent");
  check(get16(wire, 4) == 1 && get16(wire, 6) == answers.size() && get16(wire, 8) == 0 &&
            get16(wire, 10) == (q.edns ? 1 : 0),
        "the response's counts");

  // The question as written parses as the one asked.
  const auto qname = dns::encode_name(q.q.name);
  check(qname.has_value(), "a parsed name does not encode");
  std::size_t at = 12 + qname->size() + 4;
  check(wire.size() >= at, "the response is shorter than its question");
  check(wire.substr(12, qname->size()) == q.asked_name, "the question not in the case asked");
  const auto asked = reparse(std::string_view(wire).substr(12, at - 12));
  check(std::holds_alternative<dns::query>(asked), "the response's question does not parse");
  const auto& again = std::get<dns::query>(asked).q;
  check(again.name == q.q.name && again.qtype == q.q.qtype && again.qclass == q.q.qclass,
        "the response's question is not the query's");

  for (const dns::record& r : answers) {
    check(wire.size() - at >= 12 + r.rdata.size(), "an answer cut short");
    check(get16(wire, at) == 0xC00C, "an answer not owned by the question name");
    check(get16(wire, at + 2) == r.type && get16(wire, at + 4) == dns::class_in,
          "an answer's type or class");
    check((std::uint32_t{get16(wire, at + 6)} << 16 | get16(wire, at + 8)) == r.ttl,
          "an answer's TTL");
    check(get16(wire, at + 10) == r.rdata.size() && wire.substr(at + 12, r.rdata.size()) == r.rdata,
          "an answer's RDATA");
    at += 12 + r.rdata.size();
  }
  if (q.edns) {
    check(wire.size() - at >= 11 && wire[at] == '\0' && get16(wire, at + 1) == dns::type::opt &&
              get16(wire, at + 3) == dns::response_udp_payload && get16(wire, at + 9) == 0,
          "the OPT record");
    at += 11;
  }
  check(at == wire.size(), "bytes after the response's records");
}

void check_truncation(const dns::query& q) {
  // 40 A records take 640 bytes: never within 512.
  std::vector<dns::record> many(40, dns::record{dns::type::a, 1, std::string(4, '\x01')});
  const std::string wire = dns::build_response(q, dns::rcode::noerror, many, 512);
  check(wire.size() <= 512, "a truncated response over 512 bytes");
  check(get16(wire, 2) & 0x0200, "answers dropped without TC");
  check(get16(wire, 6) == 0, "a truncated response with answers");
}

void check_query(const dns::query& q) {
  check(q.udp_payload >= 512, "a UDP payload under 512");
  check(q.edns || q.udp_payload == 512, "a UDP payload other than 512 without EDNS");
  const std::vector<dns::record> two{{dns::type::a, 300, std::string("\x0a\x00\x00\x01", 4)},
                                     {dns::type::a, 0, std::string("\xc0\xa8\x00\x02", 4)}};
  check_answer(q, two);
  check_truncation(q);

  // The name form round trip: encode_name(name) parses back to the same name.
  const auto wire_name = dns::encode_name(q.q.name);
  check(wire_name.has_value(), "a parsed name does not encode");
  const auto back = reparse(*wire_name + std::string("\x00\x01\x00\x01", 4));
  check(std::holds_alternative<dns::query>(back) && std::get<dns::query>(back).q.name == q.q.name,
        "a name's presentation form does not round-trip");

  if (const auto address = dns::reverse_name_address(q.q.name))
    check(dns::reverse_name_address(dns::reverse_name(*address)) == address,
          "a reverse name's address does not round-trip");
}

void check_failure(const dns::parse_failure& f, std::size_t size) {
  check(!f.reason.empty(), "a refusal without a reason");
  check(f.header_read == (size >= 12), "the header read, or not, whatever the size");
  check(f.id.has_value() == f.header_read, "an id without the header, or none with it");
  check(!f.is_response || f.header_read, "a response seen without its header");
  if (f.header_read) {
    const std::string formerr = dns::build_header_only(*f.id, f.opcode, dns::rcode::formerr);
    check(formerr.size() == 12 && get16(formerr, 0) == *f.id && (get16(formerr, 2) & 0x0F) == 1,
          "the FORMERR header");
  }
}

// The input as a presentation name: whatever encodes parses back to the lower-case form of it,
// which encodes to the same wire name up to case.
void check_text(std::string_view text) {
  const auto wire_name = dns::encode_name(text);
  if (wire_name) {
    check(wire_name->size() <= 255, "an encoded name over 255 octets");
    const auto parsed = reparse(*wire_name + std::string("\x00\x0c\x00\x01", 4));
    check(std::holds_alternative<dns::query>(parsed), "an encoded name does not parse");
    const auto again = dns::encode_name(std::get<dns::query>(parsed).q.name);
    check(again.has_value() && again->size() == wire_name->size(),
          "a parsed name encodes to another length");
    for (std::size_t i = 0; i < again->size(); ++i) {
      const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; };
      check((*again)[i] == lower((*wire_name)[i]), "a parsed name encodes to other bytes");
    }
  }
  if (const auto address = dns::reverse_name_address(text))
    check(dns::reverse_name_address(dns::reverse_name(*address)) == address,
          "a reverse name's address does not round-trip");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes = fuzz::as_text(data, size);
  const auto result = dns::parse_query(bytes);
  if (const auto* q = std::get_if<dns::query>(&result))
    check_query(*q);
  else
    check_failure(std::get<dns::parse_failure>(result), size);
  check_text(bytes);
  return 0;
}
