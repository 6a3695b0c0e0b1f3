#include "base/digest.hpp"
#include "brokers/sigv4.hpp"

#include <catch2/catch.hpp>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "tests/unit/brokers/sigv4_test_support.hpp"

namespace sigv4 = broker::brokers::sigv4;
using namespace broker::brokers::sigv4_test;

namespace {

// ---- The S3 documentation's chunk and trailer signatures (seeds in sigv4_test_support.hpp) ---

const std::vector<std::string> docs_chunk_signatures{
    "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648",
    "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497",
    "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9"};
const std::vector<std::string> docs_trailer_chunk_signatures{
    "b474d8862b1487a5145d686f57f013e54db672cee1c953b3010fb58501ef5aa2",
    "1c1344b170168f8e65b41376b44b20fe354e373826ccbbe2c1d40a8cae51e5c7",
    "2ca2aba2005185cf7159c6277faf83795951dd77a3a99e6e65d5c9f85863f992"};
const std::string docs_trailer_signature =
    "d81f82fc3505edab99d459891051a732e8730629a2e4a59689829ca17fe2e435";

// ---- aws-chunked bodies built from the primitives, independently of chunk_resigner ----------

std::string hex_size(std::size_t n) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%zx", n);
  return buf;
}

struct chunk_chain {
  const sigv4::signing_key& key;
  std::string amz_date;
  sigv4::credential_scope scope;
};

// The aws-chunked body of `chunks` (then the 0-size chunk), chained from `seed`; with
// `trailers` ("name:value" lines) a signed trailer follows.
std::string build_chunked(const chunk_chain& c, std::string seed,
                          const std::vector<std::string>& chunks,
                          const std::vector<std::string>* trailers = nullptr) {
  auto chunk_sts = [&](const std::string& prev, const std::string& data) {
    return "AWS4-HMAC-SHA256-PAYLOAD\n" + c.amz_date + "\n" + c.scope.text() + "\n" + prev + "\n" +
           empty_hash + "\n" + broker::base::sha256_hex(data);
  };
  std::string body;
  std::string prev = std::move(seed);
  std::vector<std::string> all = chunks;
  all.emplace_back();
  for (const std::string& data : all) {
    prev = c.key.sign(chunk_sts(prev, data));
    body += hex_size(data.size()) + ";chunk-signature=" + prev + "\r\n";
    if (!data.empty()) body += data + "\r\n";
  }
  if (trailers) {
    std::string canonical;
    for (const std::string& line : *trailers) {
      body += line + "\r\n";
      canonical += line + "\n";
    }
    std::string sts = "AWS4-HMAC-SHA256-TRAILER\n" + c.amz_date + "\n" + c.scope.text() + "\n" +
                      prev + "\n" + broker::base::sha256_hex(canonical);
    body += "x-amz-trailer-signature:" + c.key.sign(sts) + "\r\n";
  }
  body += "\r\n";
  return body;
}

// The bytes of one data chunk in a body: header line, data, CRLF.
std::size_t element_size(std::size_t data_size) {
  return hex_size(data_size).size() + std::string(";chunk-signature=").size() + 64 + 2 + data_size +
         2;
}

// Two keys over the docs scope, with the seeds each would produce for the docs' request head.
struct resign_fixture {
  explicit resign_fixture(bool with_trailer = false)
      : trailer(with_trailer),
        dummy_seed(seed_signature(dummy, trailer)),
        real_seed(seed_signature(real, trailer)) {}

  sigv4::signing_key dummy{docs_secret, docs_scope};
  sigv4::signing_key real{other_secret, docs_scope};
  bool trailer;
  std::string dummy_seed;
  std::string real_seed;
  sigv4::chunk_resigner::keys keys() const {
    return {&dummy, &real, docs_date, docs_scope, dummy_seed, real_seed, trailer};
  }
  std::string client_body(const std::vector<std::string>& chunks,
                          const std::vector<std::string>* trailers = nullptr) const {
    return build_chunked({dummy, docs_date, docs_scope}, dummy_seed, chunks, trailers);
  }
  std::string upstream_body(const std::vector<std::string>& chunks,
                            const std::vector<std::string>* trailers = nullptr) const {
    return build_chunked({real, docs_date, docs_scope}, real_seed, chunks, trailers);
  }
};

// Feeds `body` cut at `cuts` (ascending offsets), checking after every piece that what has been
// released is final: a prefix of `expected` (checked piece by piece, as released bytes are never
// taken back).
std::string resign(const sigv4::chunk_resigner::keys& keys, std::string_view body,
                   const std::vector<std::size_t>& cuts, const std::string& expected) {
  sigv4::chunk_resigner r(keys);
  std::string out;
  std::size_t at = 0;
  bool prefix = true;
  for (std::size_t cut : cuts) {
    const std::size_t before = out.size();
    r.feed(body.substr(at, cut - at), out);
    at = cut;
    prefix = prefix && out.size() <= expected.size() &&
             expected.compare(before, out.size() - before, out, before) == 0;
  }
  r.feed(body.substr(at), out);
  CHECK(prefix);
  CHECK(r.complete());
  r.finish();
  return out;
}

// Feeds a broken body whole; it must throw sigv4_error with exactly `released` bytes out.
void expect_failure(const sigv4::chunk_resigner::keys& keys, std::string_view body,
                    const std::string& expected, std::size_t released,
                    std::size_t max_chunk = 1024) {
  sigv4::chunk_resigner r(keys, max_chunk);
  std::string out;
  CHECK_THROWS_AS(r.feed(body, out), sigv4::sigv4_error);
  CHECK(out == expected.substr(0, released));
  CHECK_FALSE(r.complete());
  CHECK_THROWS_AS(r.finish(), sigv4::sigv4_error);
  std::string more;  // a failed stream stays failed
  CHECK_THROWS_AS(r.feed("0", more), sigv4::sigv4_error);
  CHECK(more.empty());
}

const std::vector<std::string> small_chunks{"hello", "world, again", "!"};

}  // namespace

TEST_CASE("sigv4: chunk_resigner re-signs the S3 documentation's chunked upload",
          "[brokers][sigv4][chunked]") {
  resign_fixture f;
  REQUIRE(f.dummy_seed == docs_chunked_seed);
  const std::vector<std::string> chunks{std::string(65536, 'a'), std::string(1024, 'a')};
  const std::string body = f.client_body(chunks);
  // The body the docs show: these three signatures and 66824 bytes.
  CHECK(body.size() == 66824);
  CHECK(body == "10000;chunk-signature=" + docs_chunk_signatures[0] + "\r\n" + chunks[0] +
                    "\r\n400;chunk-signature=" + docs_chunk_signatures[1] + "\r\n" + chunks[1] +
                    "\r\n0;chunk-signature=" + docs_chunk_signatures[2] + "\r\n\r\n");
  const std::string expected = f.upstream_body(chunks);
  REQUIRE(expected.size() == body.size());
  REQUIRE(expected != body);

  SECTION("whole") {
    CHECK(resign(f.keys(), body, {}, expected) == expected);
  }
  SECTION("one byte at a time") {
    std::vector<std::size_t> cuts;
    for (std::size_t i = 1; i < body.size(); ++i) cuts.push_back(i);
    CHECK(resign(f.keys(), body, cuts, expected) == expected);
  }
  SECTION("random pieces") {
    std::mt19937 rng(20130524);
    for (int round = 0; round < 20; ++round) {
      std::uniform_int_distribution<std::size_t> step(1, round % 2 ? 100 : 20000);
      std::vector<std::size_t> cuts;
      for (std::size_t at = step(rng); at < body.size(); at += step(rng)) cuts.push_back(at);
      CHECK(resign(f.keys(), body, cuts, expected) == expected);
    }
  }
  SECTION("nothing of a chunk goes out before its data is complete") {
    sigv4::chunk_resigner r(f.keys());
    std::string out;
    r.feed(std::string_view(body).substr(0, element_size(65536) - 1), out);
    CHECK(out.empty());
    r.feed(std::string_view(body).substr(element_size(65536) - 1, 1), out);
    CHECK(out == expected.substr(0, element_size(65536)));
  }
}

TEST_CASE("sigv4: chunk_resigner at every split position", "[brokers][sigv4][chunked]") {
  for (bool trailer : {false, true}) {
    INFO("signed trailer: " << trailer);
    resign_fixture f(trailer);
    const std::vector<std::string> trailers{"x-amz-checksum-crc32:AAAAAA==",
                                            "x-amz-checksum-sha256:abc/def+g=="};
    const auto* t = trailer ? &trailers : nullptr;
    const std::string body = f.client_body(small_chunks, t);
    const std::string expected = f.upstream_body(small_chunks, t);
    for (std::size_t i = 0; i <= body.size(); ++i) {
      for (std::size_t j = i; j <= body.size(); j += 37) {
        INFO("cuts at " << i << " and " << j);
        CHECK(resign(f.keys(), body, {i, j}, expected) == expected);
      }
    }
  }
}

TEST_CASE("sigv4: chunk_resigner refuses broken bodies and releases nothing of the bad chunk",
          "[brokers][sigv4][chunked]") {
  resign_fixture f;
  const std::string body = f.client_body(small_chunks);
  const std::string expected = f.upstream_body(small_chunks);
  const std::size_t first = element_size(small_chunks[0].size());
  const std::size_t second_data = first + element_size(small_chunks[1].size()) -
                                  small_chunks[1].size() - 2;  // where chunk 2's data starts
  REQUIRE(body.substr(second_data, small_chunks[1].size()) == small_chunks[1]);

  SECTION("a tampered data byte") {
    std::string bad = body;
    bad[second_data + 3] ^= 1;
    expect_failure(f.keys(), bad, expected, first);
  }
  SECTION("a tampered signature") {
    std::string bad = body;
    char& c = bad[second_data - 3];  // inside chunk 2's signature
    c = c == '0' ? '1' : '0';
    expect_failure(f.keys(), bad, expected, first);
  }
  SECTION("a malformed signature") {
    std::string bad = body;
    bad[second_data - 3] = 'G';
    expect_failure(f.keys(), bad, expected, first);
  }
  SECTION("a chunk signature chained from another seed") {
    auto keys = f.keys();
    keys.dummy_seed = broker::base::sha256_hex("another seed");
    expect_failure(keys, body, expected, 0);
  }
  SECTION("chunks in another order, each with its own signature") {
    const std::size_t second = element_size(small_chunks[1].size());
    const std::string swapped =
        body.substr(first, second) + body.substr(0, first) + body.substr(first + second);
    expect_failure(f.keys(), swapped, expected, 0);
  }
  SECTION("an oversized chunk") {
    expect_failure(f.keys(), body, expected, first, small_chunks[1].size() - 1);
  }
  SECTION("a size that is not hex") {
    std::string bad = body;
    bad.replace(first, 1, "x");
    expect_failure(f.keys(), bad, expected, first);
  }
  SECTION("a size with more than 16 digits") {
    std::string bad = body;
    bad.insert(first, std::string(16, '0'));
    expect_failure(f.keys(), bad, expected, first);
  }
  SECTION("another chunk extension") {
    std::string bad = body;
    bad.replace(bad.find(";chunk-signature=", first), 17, ";chunk-signatur=x");
    expect_failure(f.keys(), bad, expected, first);
  }
  SECTION("no CRLF after the data") {
    std::string bad = body;
    bad.replace(second_data + small_chunks[1].size(), 2, "\n\n");
    expect_failure(f.keys(), bad, expected, first);
  }
  SECTION("more data than the size says") {
    std::string bad = body;
    bad.insert(second_data, "x");
    expect_failure(f.keys(), bad, expected, first);
  }
  SECTION("a header ended by a bare LF") {
    std::string bad = body;
    bad.erase(second_data - 2, 1);
    expect_failure(f.keys(), bad, expected, first);
  }
  SECTION("a body closed by a bare LF") {
    std::string bad = body;
    bad.erase(bad.size() - 2, 1);
    expect_failure(f.keys(), bad, expected, body.size() - 2);
  }
  SECTION("an endless header line") {
    expect_failure(f.keys(), body.substr(0, first) + "1" + std::string(200, '0'), expected, first);
  }
  SECTION("bytes after the end") {
    expect_failure(f.keys(), body + "0", expected, body.size());
  }
  SECTION("a trailer line where none is signed") {
    std::string bad = body;
    bad.insert(bad.size() - 2, "x-amz-checksum-crc32:AAAAAA==\r\n");
    expect_failure(f.keys(), bad, expected, body.size() - 2);
  }
  SECTION("truncated bodies") {
    for (std::size_t cut : {std::size_t{0}, first - 1, first, second_data + 2, body.size() - 1}) {
      INFO("cut at " << cut);
      sigv4::chunk_resigner r(f.keys());
      std::string out;
      r.feed(std::string_view(body).substr(0, cut), out);
      CHECK_FALSE(r.complete());
      CHECK_THROWS_AS(r.finish(), sigv4::sigv4_error);
      CHECK(expected.compare(0, out.size(), out) == 0);
      CHECK(out.size() <= cut);
    }
  }
}

TEST_CASE("sigv4: chunk_resigner signed trailers", "[brokers][sigv4][chunked]") {
  resign_fixture f(true);
  REQUIRE(f.dummy_seed == docs_trailer_seed);

  SECTION("the S3 documentation's trailer example") {
    const std::vector<std::string> chunks{std::string(65536, 'a'), std::string(1024, 'a')};
    const std::vector<std::string> trailers{"x-amz-checksum-crc32c:sOO8/Q=="};
    const std::string body = f.client_body(chunks, &trailers);
    CHECK(body == "10000;chunk-signature=" + docs_trailer_chunk_signatures[0] + "\r\n" + chunks[0] +
                      "\r\n400;chunk-signature=" + docs_trailer_chunk_signatures[1] + "\r\n" +
                      chunks[1] + "\r\n0;chunk-signature=" + docs_trailer_chunk_signatures[2] +
                      "\r\nx-amz-checksum-crc32c:sOO8/Q==\r\nx-amz-trailer-signature:" +
                      docs_trailer_signature + "\r\n\r\n");
    const std::string expected = f.upstream_body(chunks, &trailers);
    std::vector<std::size_t> cuts;
    for (std::size_t i = 1; i < body.size(); ++i) cuts.push_back(i);
    CHECK(resign(f.keys(), body, cuts, expected) == expected);
  }

  const std::vector<std::string> trailers{"x-amz-checksum-crc32:NSRBwg==", "x-amz-meta-note:a b"};
  const std::string body = f.client_body(small_chunks, &trailers);
  const std::string expected = f.upstream_body(small_chunks, &trailers);
  // Everything up to and including the final chunk's header.
  const std::size_t chunks_end = body.find("x-amz-checksum-crc32:");
  REQUIRE(chunks_end != std::string::npos);
  CHECK(resign(f.keys(), body, {}, expected) == expected);

  SECTION("a tampered trailer value") {
    std::string bad = body;
    bad[chunks_end + 22] ^= 1;
    expect_failure(f.keys(), bad, expected, chunks_end);
  }
  SECTION("a tampered trailer signature") {
    std::string bad = body;
    char& c = bad[bad.find("x-amz-trailer-signature:") + 30];
    c = c == '0' ? '1' : '0';
    expect_failure(f.keys(), bad, expected, chunks_end);
  }
  SECTION("no trailer signature") {
    std::string bad = body.substr(0, body.find("x-amz-trailer-signature:")) + "\r\n";
    expect_failure(f.keys(), bad, expected, chunks_end);
  }
  SECTION("a trailer line after the trailer signature") {
    std::string bad = body;
    bad.insert(bad.size() - 2, "x-amz-late:1\r\n");
    expect_failure(f.keys(), bad, expected, body.size() - 2);
  }
  SECTION("a malformed trailer line") {
    std::string bad = body;
    bad.replace(chunks_end, 21, "no colon in this one!");
    expect_failure(f.keys(), bad, expected, chunks_end);
  }
  SECTION("truncated before the closing CRLF") {
    sigv4::chunk_resigner r(f.keys());
    std::string out;
    r.feed(std::string_view(body).substr(0, body.size() - 1), out);
    CHECK(out == expected.substr(0, expected.size() - 2));
    CHECK_THROWS_AS(r.finish(), sigv4::sigv4_error);
  }
}
