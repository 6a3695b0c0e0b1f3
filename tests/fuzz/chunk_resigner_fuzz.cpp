// The aws-chunked re-signer (sigv4::chunk_resigner, brokers/sigv4_chunked.cpp). Input: a mode
// byte, then either
// - raw: the rest is the body as the client sent it (framing and signature checks), or
// - built: the rest describes chunks (and signed trailer lines) that are signed here with the
//   dummy key into a valid body, optionally damaged at one input-chosen byte.
// The body goes through the re-signer in one piece and at input-derived split points. sigv4_error
// is the documented refusal; any other exception is a finding. Both runs must release the same
// bytes and agree on the outcome; an undamaged body must come out exactly as the real key signs
// it, and any accepted body keeps its length.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "base/digest.hpp"
#include "brokers/sigv4.hpp"
#include "fuzz_support.hpp"

namespace {

using namespace broker;
namespace sigv4 = brokers::sigv4;
using fuzz::check;

const sigv4::credential_scope scope{"20130524", "us-east-1", "s3"};
const std::string amz_date = "20130524T000000Z";
const sigv4::signing_key dummy_key("dummy/K7MDENG/bPxRfiCYEXAMPLEKEY0000", scope);
const sigv4::signing_key real_key("real/Zp9Utk/h3yCo8nvbEXAMPLEKEY00000", scope);
// Any signatures do as seeds; what matters is that the two chains start apart.
const std::string dummy_seed = dummy_key.sign("seed");
const std::string real_seed = real_key.sign("seed");

constexpr std::size_t default_max_chunk = 16 * 1024 * 1024;
constexpr std::size_t small_max_chunk = 16;
constexpr std::string_view trailer_names[] = {"x-amz-checksum-crc32c", "x-amz-checksum-sha256",
                                              "x-amz-meta-note"};

struct body_plan {
  std::vector<std::string> chunks;    // each non-empty; the 0-size chunk is added
  std::vector<std::string> trailers;  // "name:value" lines
  bool signed_trailer = false;
};

std::string hex_size(std::size_t n) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%zx", n);
  return buf;
}

// The body a client holding `key` sends, built from the signing primitives alone.
std::string build(const sigv4::signing_key& key, std::string previous, const body_plan& plan) {
  const std::string prefix = "\n" + amz_date + "\n" + scope.text() + "\n";
  std::string body;
  std::vector<std::string> all = plan.chunks;
  all.emplace_back();
  for (const std::string& data : all) {
    previous = key.sign("AWS4-HMAC-SHA256-PAYLOAD" + prefix + previous + "\n" +
                        std::string(sigv4::empty_sha256) + "\n" + base::sha256_hex(data));
    body += hex_size(data.size()) + ";chunk-signature=" + previous + "\r\n";
    if (!data.empty()) body += data + "\r\n";
  }
  if (plan.signed_trailer) {
    std::string canonical;
    for (const std::string& line : plan.trailers) {
      body += line + "\r\n";
      canonical += line + "\n";
    }
    body += "x-amz-trailer-signature:" +
            key.sign("AWS4-HMAC-SHA256-TRAILER" + prefix + previous + "\n" +
                     base::sha256_hex(canonical)) +
            "\r\n";
  }
  return body + "\r\n";
}

body_plan plan_of(fuzz::byte_reader& in, bool signed_trailer) {
  body_plan plan;
  plan.signed_trailer = signed_trailer;
  for (int n = in.byte() % 5; n > 0; --n) {
    const std::string_view data = in.bytes(1 + in.byte() % 40);
    if (!data.empty()) plan.chunks.emplace_back(data);
  }
  if (!signed_trailer) return plan;
  for (int n = in.byte() % 3; n > 0; --n) {
    std::string line(trailer_names[in.byte() % std::size(trailer_names)]);
    line += ':';
    for (char c : in.bytes(1 + in.byte() % 16)) line += static_cast<char>('!' + (c & 0x3f));
    plan.trailers.push_back(std::move(line));
  }
  return plan;
}

// Damages one byte of `body` as the input says; false when the mutation is "none".
bool damage(std::string& body, fuzz::byte_reader& in) {
  const std::uint8_t op = in.byte() % 8;
  if (op < 4 || body.empty()) return false;
  const std::size_t at = in.u16() % body.size();
  switch (op) {
    case 4:
      body[at] = static_cast<char>(body[at] ^ (in.byte() | 1));
      break;
    case 5:
      body.erase(at, 1);
      break;
    case 6:
      body.insert(at, 1, static_cast<char>(in.byte()));
      break;
    default:
      body.resize(at);
      break;
  }
  return true;
}

struct outcome {
  std::string out;
  bool refused = false;  // feed or finish threw sigv4_error
  bool complete = false;
};

outcome resign(const sigv4::chunk_resigner::keys& keys, std::size_t max_chunk,
               const std::vector<std::string_view>& pieces) {
  sigv4::chunk_resigner resigner(keys, max_chunk);
  outcome o;
  bool fed = false;  // every piece went in; only finish() may still refuse
  try {
    for (std::string_view piece : pieces) resigner.feed(piece, o.out);
    fed = true;
    resigner.finish();
  } catch (const sigv4::sigv4_error&) {
    o.refused = true;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "chunk_resigner threw %s\n", e.what());
    fuzz::fail("chunk_resigner threw something other than sigv4_error");
  }
  o.complete = resigner.complete();
  check(o.refused != o.complete, "complete() disagrees with finish()");
  if (!fed) {  // a stream refused mid-body stays refused and releases nothing more
    const std::size_t released = o.out.size();
    bool refused_again = false;
    try {
      resigner.feed("0", o.out);
    } catch (const sigv4::sigv4_error&) {
      refused_again = true;
    }
    check(refused_again && o.out.size() == released, "a refused stream went on");
  }
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::byte_reader in(fuzz::as_text(data, size));
  const std::uint8_t mode = in.byte();
  const bool built = mode & 1;
  const bool signed_trailer = mode & 2;
  const std::size_t max_chunk = mode & 4 ? small_max_chunk : default_max_chunk;

  std::string body;
  std::string expected;  // what an undamaged built body must become
  bool must_pass = false;
  if (built) {
    const body_plan plan = plan_of(in, signed_trailer);
    body = build(dummy_key, dummy_seed, plan);
    must_pass = !damage(body, in);
    for (const std::string& chunk : plan.chunks) must_pass &= chunk.size() <= max_chunk;
    if (must_pass) expected = build(real_key, real_seed, plan);
  } else {
    body = in.rest();
  }

  const sigv4::chunk_resigner::keys keys{.dummy = &dummy_key,
                                         .real = &real_key,
                                         .amz_date = amz_date,
                                         .scope = scope,
                                         .dummy_seed = dummy_seed,
                                         .real_seed = real_seed,
                                         .signed_trailer = signed_trailer};
  const outcome whole = resign(keys, max_chunk, {body});
  const outcome split = resign(keys, max_chunk, fuzz::pieces_of(body, fuzz::hash_of(body)));
  check(whole.refused == split.refused, "split changed whether the body was refused");
  check(whole.out == split.out, "split changed the released bytes");
  if (whole.complete) check(whole.out.size() == body.size(), "re-signing changed the body length");
  if (must_pass) {
    check(whole.complete, "a correctly signed body was refused");
    check(whole.out == expected, "re-signed body differs from the real key's signing");
  }
  return 0;
}
