#include "http/content_decoder.hpp"

#include <catch2/catch.hpp>

#include "coded_samples.hpp"

using namespace broker;
using http::content_coding;
using http::decode_status;

namespace {

constexpr http::decode_limits roomy{64 * 1024 * 1024, 1024 * 1024, 1000};

struct decoded {
  decode_status status = decode_status::ok;
  std::string out;
  std::string error;
};

// Feeds `coded` in pieces cut at `cuts` (ascending), then finishes.
decoded decode(const std::vector<content_coding>& applied, std::string_view coded,
               const std::vector<std::size_t>& cuts = {}, http::decode_limits limits = roomy) {
  http::content_decoder d(applied, limits);
  decoded r;
  const auto sink = [&r](std::string_view piece) {
    CHECK(!piece.empty());
    r.out.append(piece);
  };
  std::size_t from = 0;
  for (std::size_t cut : cuts) {
    if ((r.status = d.feed(coded.substr(from, cut - from), sink)) != decode_status::ok) break;
    from = cut;
  }
  if (r.status == decode_status::ok) r.status = d.feed(coded.substr(from), sink);
  if (r.status == decode_status::ok) r.status = d.finish();
  CHECK(d.decoded_bytes() == r.out.size());
  r.error = d.error();
  return r;
}

std::vector<std::size_t> every_byte(std::size_t n) {
  std::vector<std::size_t> cuts;
  for (std::size_t i = 1; i < n; ++i) cuts.push_back(i);
  return cuts;
}

}  // namespace

TEST_CASE("each coding decodes what its library encoded", "[content_decoder]") {
  for (auto c : test::all_codings) {
    INFO(http::name_of(c));
    for (std::size_t n : {1u, 100u, 70'000u, 300'000u}) {
      const std::string text = test::sample_text(n);
      const auto r = decode({c}, test::encode(c, text));
      CHECK(r.status == decode_status::ok);
      CHECK(r.out == text);
      const std::string noise = test::incompressible(n);
      CHECK(decode({c}, test::encode(c, noise)).out == noise);
    }
  }
}

TEST_CASE("a list is undone from its last coding back", "[content_decoder]") {
  const std::string text = test::sample_text(50'000);
  const std::vector<content_coding> applied{content_coding::gzip, content_coding::br};
  const std::string coded = test::encode_all(applied, text);
  CHECK(decode(applied, coded).out == text);
  // The same bytes read as if br had come first are not br at the outside.
  CHECK(decode({content_coding::br, content_coding::gzip}, coded).status == decode_status::corrupt);
  const std::vector<content_coding> three{content_coding::zstd, content_coding::deflate,
                                          content_coding::gzip};
  CHECK(decode(three, test::encode_all(three, text)).out == text);
}

TEST_CASE("input split at every byte decodes as it does whole", "[content_decoder]") {
  const std::string text = test::sample_text(3000) + test::incompressible(500);
  for (auto c : test::all_codings) {
    INFO(http::name_of(c));
    const std::string coded = test::encode(c, text);
    CHECK(decode({c}, coded, every_byte(coded.size())).out == text);
    for (std::size_t cut = 0; cut <= coded.size(); ++cut) {
      const auto r = decode({c}, coded, {cut});
      REQUIRE(r.status == decode_status::ok);
      REQUIRE(r.out == text);
    }
  }
  const std::vector<content_coding> two{content_coding::zstd, content_coding::gzip};
  const std::string coded = test::encode_all(two, text);
  CHECK(decode(two, coded, every_byte(coded.size())).out == text);
}

TEST_CASE("gzip members and zstd frames in a row are one body", "[content_decoder]") {
  const std::string a = test::sample_text(1000), b = test::incompressible(300);
  CHECK(
      decode({content_coding::gzip}, test::zlib_encode(a, true) + test::zlib_encode(b, true)).out ==
      a + b);
  CHECK(decode({content_coding::zstd}, test::zstd_encode(a) + test::zstd_encode(b)).out == a + b);
}

TEST_CASE("a cut short body is corrupt at its end", "[content_decoder]") {
  const std::string text = test::sample_text(5000);
  for (auto c : test::all_codings) {
    INFO(http::name_of(c));
    const std::string coded = test::encode(c, text);
    for (std::size_t n = 1; n < coded.size(); n += 1 + n / 8) {
      INFO(n);
      const auto r = decode({c}, coded.substr(0, n));
      CHECK(r.status == decode_status::corrupt);
      CHECK(r.error.find(http::name_of(c)) != std::string::npos);
    }
    // Nothing at all is an empty body, not a cut one.
    CHECK(decode({c}, "").status == decode_status::ok);
  }
}

TEST_CASE("bytes after the end of a stream are corrupt", "[content_decoder]") {
  const std::string text = test::sample_text(2000);
  for (auto c : test::all_codings) {
    INFO(http::name_of(c));
    const std::string coded = test::encode(c, text);
    CHECK(decode({c}, coded + "trailing garbage").status == decode_status::corrupt);
    CHECK(decode({c}, coded + std::string(1, '\0')).status == decode_status::corrupt);
  }
}

TEST_CASE("data that is not its coding is corrupt", "[content_decoder]") {
  const std::string plain = "{\"plain\": \"json, not coded at all\"}";
  for (auto c : test::all_codings) {
    INFO(http::name_of(c));
    CHECK(decode({c}, plain).status == decode_status::corrupt);
  }
  // RFC 9110's deflate is the zlib format; a bare deflate stream is not.
  CHECK(decode({content_coding::deflate}, test::raw_deflate(plain)).status ==
        decode_status::corrupt);
  // A gzip stream whose checksum does not match.
  std::string coded = test::zlib_encode(plain, true);
  coded[coded.size() - 6] ^= 0x55;
  CHECK(decode({content_coding::gzip}, coded).status == decode_status::corrupt);
}

TEST_CASE("a zstd frame asking for a window over 8 MiB is refused", "[content_decoder]") {
  const std::string text = test::incompressible(10 * 1024 * 1024);
  const std::string coded = test::zstd_encode(text, 1, 25);
  const auto r = decode({content_coding::zstd}, coded);
  CHECK(r.status == decode_status::corrupt);
  CHECK(r.out.size() < 1024 * 1024);
  CHECK(decode({content_coding::zstd}, test::zstd_encode(text, 3, 23)).out == text);
}

TEST_CASE("decoded bytes past the size limit stop the body", "[content_decoder]") {
  const http::decode_limits small{100'000, 1'000'000, 1000};
  const std::string noise = test::incompressible(150'000);
  for (auto c : test::all_codings) {
    INFO(http::name_of(c));
    const auto r = decode({c}, test::encode(c, noise), {}, small);
    CHECK(r.status == decode_status::too_large);
    CHECK(r.out.size() <= 100'000);
    CHECK(decode({c}, test::encode(c, noise.substr(0, 100'000)), {}, small).status ==
          decode_status::ok);
  }
}

TEST_CASE("a decompression bomb stops at the ratio limit", "[content_decoder]") {
  const http::decode_limits limits{64 * 1024 * 1024, 64 * 1024, 100};
  const std::string zeros(8 * 1024 * 1024, '\0');
  for (auto c : test::all_codings) {
    INFO(http::name_of(c));
    const std::string coded = test::encode(c, zeros);
    REQUIRE(coded.size() * 100 < zeros.size());
    const auto r = decode({c}, coded, every_byte(std::min<std::size_t>(coded.size(), 200)), limits);
    CHECK(r.status == decode_status::too_large);
    CHECK(r.error.find("times its coded size") != std::string::npos);
    // It stopped well before the bomb went off: at most a piece past the limit.
    CHECK(r.out.size() <= std::max<std::size_t>(64 * 1024, coded.size() * 100) + 64 * 1024);
  }
  // A bomb nested in a second coding is caught in the inner one.
  const std::vector<content_coding> two{content_coding::gzip, content_coding::gzip};
  CHECK(decode(two, test::encode_all(two, zeros), {}, limits).status == decode_status::too_large);
}

TEST_CASE("a checkpoint never passes coded bytes whose content is still held",
          "[content_decoder]") {
  // Incompressible data is stored as it is (a stored deflate block, a raw zstd block, an
  // uncompressed brotli meta-block): the marker's bytes sit in the coded body verbatim.
  const std::string marker = test::incompressible(40, 99);
  const std::string text = test::incompressible(20'000) + marker + test::incompressible(20'000, 11);
  for (auto c : test::all_codings) {
    INFO(http::name_of(c));
    const std::string coded = test::encode(c, text);
    const auto at = coded.find(marker);
    REQUIRE(at != std::string::npos);
    http::content_decoder d({c}, roomy);
    std::string out;
    for (std::size_t i = 0; i < coded.size(); ++i) {
      REQUIRE(d.feed(coded.substr(i, 1), [&out](std::string_view p) { out.append(p); }) ==
              decode_status::ok);
      const auto settled = d.settled();
      REQUIRE(settled.coded <= i + 1);
      REQUIRE(settled.decoded <= out.size());
      // Once the marker's last coded byte is settled, its decoded bytes are out.
      if (settled.coded >= at + marker.size())
        REQUIRE(out.substr(0, settled.decoded).find(marker) != std::string::npos);
    }
    CHECK(d.finish() == decode_status::ok);
    CHECK(d.settled().coded == coded.size());
    CHECK(out == text);
  }
}
