#include "http/content_coding.hpp"

#include <catch2/catch.hpp>

using namespace broker;
using http::content_coding;

TEST_CASE("a Content-Encoding list names the codings in the order applied", "[content_coding]") {
  const auto parsed = http::parse_content_codings({"gzip", "identity", "BR", "x-gzip", "zstd"});
  CHECK(parsed.unsupported.empty());
  CHECK(parsed.applied == std::vector<content_coding>{content_coding::gzip, content_coding::br,
                                                      content_coding::gzip, content_coding::zstd});
  CHECK(http::parse_content_codings({"Deflate"}).applied ==
        std::vector<content_coding>{content_coding::deflate});
}

TEST_CASE("identity alone is no coding", "[content_coding]") {
  const auto parsed = http::parse_content_codings({"identity", "IDENTITY"});
  CHECK(parsed.applied.empty());
  CHECK(parsed.unsupported.empty());
  CHECK(http::parse_content_codings({}).applied.empty());
}

TEST_CASE("a coding the broker cannot read is named", "[content_coding]") {
  for (const char* name :
       {"compress", "x-compress", "exi", "pack200-gzip", "gzip;q=1", "aws-chunked"}) {
    const auto parsed = http::parse_content_codings({"gzip", name, "br"});
    CHECK(parsed.unsupported == name);
    CHECK(parsed.applied.empty());
  }
}

TEST_CASE("more codings in a row than the limit are not read", "[content_coding]") {
  std::vector<std::string_view> many(http::max_codings, "gzip");
  CHECK(http::parse_content_codings(many).unsupported.empty());
  many.push_back("br");
  const auto parsed = http::parse_content_codings(many);
  CHECK(parsed.unsupported == "5 codings in a row");
  CHECK(parsed.applied.empty());
}
