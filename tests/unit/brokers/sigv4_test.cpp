#include "brokers/sigv4.hpp"
#include "base/digest.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "tests/unit/brokers/sigv4_test_support.hpp"

namespace sigv4 = broker::brokers::sigv4;
using broker::http::header_field;
using namespace broker::brokers::sigv4_test;

namespace {

// ---- The AWS SigV4 test suite (aws-sig-v4-test-suite, 2015-08-30 edition) -------------------

const std::string suite_secret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
const sigv4::credential_scope suite_scope{"20150830", "us-east-1", "service"};
const std::string suite_date = "20150830T123600Z";
const std::string suite_sts_prefix =
    "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n";
const std::string suite_token =
    "AQoDYXdzEPT//////////wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQWLWsKWHGBuFqwAeMicRXmxfpSPf"
    "IeoIYRqTflfKD8YUuwthAx7mSEI/qkPpKPi/kMcGdQrmGdeehM4IC1NtBmUpp2wUE8phUZampKsburEDy0KPkyQDYwT7"
    "WZ0wq5VSXDvp75YU9HFvlRd8Tx6q6fE8YQcHNVXAkiY9q6d+xo0rKwT38xVqr7ZD0u0iPPkUL64lIZbqBAz+scqKmlzm"
    "8FDrypNC9Yjc8fPOLn9FX9KSYvKTr4rvx3iSIlTJabIQwj2ICCR/oLxBA==";

struct suite_case {
  std::string name;
  std::string method;
  std::string target;
  std::vector<header_field> headers;
  std::vector<std::string> signed_headers;
  std::string payload_hash;
  std::string creq;       // the .creq file
  std::string sts_hash;   // the last line of the .sts file
  std::string signature;  // from the .authz file
};

std::vector<header_field> vanilla_headers(std::vector<header_field> extra = {}) {
  std::vector<header_field> h{{"Host", "example.amazonaws.com"}};
  h.insert(h.end(), extra.begin(), extra.end());
  h.push_back({"X-Amz-Date", "20150830T123600Z"});
  return h;
}

const std::vector<std::string> host_date{"host", "x-amz-date"};
const std::string vanilla_headers_creq =
    "host:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n";

suite_case vanilla_get(std::string name, std::string target, std::string creq_path_and_query,
                       std::string sts_hash, std::string signature) {
  return {std::move(name),
          "GET",
          std::move(target),
          vanilla_headers(),
          host_date,
          empty_hash,
          "GET\n" + creq_path_and_query + "\n" + vanilla_headers_creq + empty_hash,
          std::move(sts_hash),
          std::move(signature)};
}

std::vector<suite_case> suite_cases() {
  const std::string unreserved =
      "-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  const std::string vanilla_hash =
      "bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63";
  const std::string vanilla_sig =
      "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31";
  std::vector<suite_case> cases{
      vanilla_get("get-vanilla", "/", "/\n", vanilla_hash, vanilla_sig),
      vanilla_get("get-vanilla-empty-query-key", "/?Param1=value1", "/\nParam1=value1",
                  "1e24db194ed7d0eec2de28d7369675a243488e08526e8c1c73571282f7c517ab",
                  "a67d582fa61cc504c4bae71f336f98b97f1ea3c7a6bfe1b6e45aec72011b9aeb"),
      vanilla_get("get-vanilla-query-order-key-case", "/?Param2=value2&Param1=value1",
                  "/\nParam1=value1&Param2=value2",
                  "816cd5b414d056048ba4f7c5386d6e0533120fb1fcfa93762cf0fc39e2cf19e0",
                  "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"),
      vanilla_get("get-vanilla-query-order-key", "/?Param1=value2&Param1=Value1",
                  "/\nParam1=Value1&Param1=value2",
                  "704b4cef673542d84cdff252633f065e8daeba5f168b77116f8b1bcaf3d38f89",
                  "eedbc4e291e521cf13422ffca22be7d2eb8146eecf653089df300a15b2382bd1"),
      vanilla_get("get-vanilla-query-order-value", "/?Param1=value2&Param1=value1",
                  "/\nParam1=value1&Param1=value2",
                  "c968629d70850097a2d8781c9bf7edcb988b04cac14cca9be4acc3595f884606",
                  "5772eed61e12b33fae39ee5e7012498b51d56abc0abb7c60486157bd471c4694"),
      vanilla_get("get-vanilla-query-unreserved", "/?" + unreserved + "=" + unreserved,
                  "/\n" + unreserved + "=" + unreserved,
                  "c30d4703d9f799439be92736156d47ccfb2d879ddf56f5befa6d1d6aab979177",
                  "9c3e54bfcdf0b19771a7f523ee5669cdf59bc7cc0884027167c21bb143a40197"),
      vanilla_get("get-vanilla-utf8-query", "/?\xE1\x88\xB4=bar", "/\n%E1%88%B4=bar",
                  "eb30c5bed55734080471a834cc727ae56beb50e5f39d1bff6d0d38cb192a7073",
                  "2cdec8eed098649ff3a119c94853b13c643bcf08f8b0a1d91e12c9027818dd04"),
      vanilla_get("get-unreserved", "/" + unreserved, "/" + unreserved + "\n",
                  "6a968768eefaa713e2a6b16b589a8ea192661f098f37349f4e2c0082757446f9",
                  "07ef7494c76fa4850883e2b006601f940f8a34d404d0cfa977f52a65bbf5f24f"),
      // normalize-path
      vanilla_get("get-relative", "/example/..", "/\n", vanilla_hash, vanilla_sig),
      vanilla_get("get-relative-relative", "/example1/example2/../..", "/\n", vanilla_hash,
                  vanilla_sig),
      vanilla_get("get-slash", "//", "/\n", vanilla_hash, vanilla_sig),
      vanilla_get("get-slash-dot-slash", "/./", "/\n", vanilla_hash, vanilla_sig),
      vanilla_get("get-slash-pointless-dot", "/./example", "/example\n",
                  "214d50c111a8edc4819da6a636336472c916b5240f51e9a51b5c3305180cf702",
                  "ef75d96142cf21edca26f06005da7988e4f8dc83a165a80865db7089db637ec5"),
      vanilla_get("get-slashes", "//example//", "/example/\n",
                  "cb96b4ac96d501f7c5c15bc6d67b3035061cfced4af6585ad927f7e6c985c015",
                  "9a624bd73a37c9a373b5312afbebe7a714a789de108f0bdfe846570885f57e84"),
      vanilla_get("get-space", "/example space/", "/example%20space/\n",
                  "63ee75631ed7234ae61b5f736dfc7754cdccfedbff4b5128a915706ee9390d86",
                  "652487583200325589f1fba4c7e578f72c47cb61beeca81406b39ddec1366741"),
  };

  const std::vector<std::string> my_header{"host", "my-header1", "x-amz-date"};
  auto my_header_creq = [](const std::string& method, const std::string& value) {
    return method + "\n/\n\nhost:example.amazonaws.com\nmy-header1:" + value +
           "\nx-amz-date:20150830T123600Z\n\nhost;my-header1;x-amz-date\n" + empty_hash;
  };
  cases.push_back(
      {"get-header-key-duplicate", "GET", "/",
       vanilla_headers(
           {{"My-Header1", "value2"}, {"My-Header1", "value2"}, {"My-Header1", "value1"}}),
       my_header, empty_hash, my_header_creq("GET", "value2,value2,value1"),
       "dc7f04a3abfde8d472b0ab1a418b741b7c67174dad1551b4117b15527fbe966c",
       "c9d5ea9f3f72853aea855b47ea873832890dbdd183b4468f858259531a5138ea"});
  cases.push_back({"get-header-value-order", "GET", "/",
                   vanilla_headers({{"My-Header1", "value4"},
                                    {"My-Header1", "value1"},
                                    {"My-Header1", "value3"},
                                    {"My-Header1", "value2"}}),
                   my_header, empty_hash, my_header_creq("GET", "value4,value1,value3,value2"),
                   "31ce73cd3f3d9f66977ad3dd957dc47af14df92fcd8509f59b349e9137c58b86",
                   "08c7e5a9acfcfeb3ab6b2185e75ce8b1deb5e634ec47601a50643f830c755c01"});
  // The suite's request has "My-Header1: value1" and "My-Header2: \"a   b   c\""; the values
  // here keep surrounding whitespace too, to exercise the trim as well as the collapse.
  cases.push_back({"get-header-value-trim",
                   "GET",
                   "/",
                   vanilla_headers({{"My-Header1", " value1"}, {"My-Header2", " \"a   b   c\"  "}}),
                   {"host", "my-header1", "my-header2", "x-amz-date"},
                   empty_hash,
                   "GET\n/\n\nhost:example.amazonaws.com\nmy-header1:value1\nmy-header2:\"a b c\"\n"
                   "x-amz-date:20150830T123600Z\n\nhost;my-header1;my-header2;x-amz-date\n" +
                       empty_hash,
                   "a726db9b0df21c14f559d0a978e563112acb1b9e05476f0a6a1c7d68f28605c7",
                   "acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736"});
  cases.push_back({"post-vanilla", "POST", "/", vanilla_headers(), host_date, empty_hash,
                   "POST\n/\n\n" + vanilla_headers_creq + empty_hash,
                   "553f88c9e4d10fc9e109e2aeb65f030801b70c2f6468faca261d401ae622fc87",
                   "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"});
  cases.push_back({"post-vanilla-query", "POST", "/?Param1=value1", vanilla_headers(), host_date,
                   empty_hash, "POST\n/\nParam1=value1\n" + vanilla_headers_creq + empty_hash,
                   "9d659678c1756bb3113e2ce898845a0a79dbbc57b740555917687f1b3340fbbd",
                   "28038455d6de14eafc1f9222cf5aa6f1a96197d7deb8263271d420d138af7f11"});
  cases.push_back({"post-header-key-sort", "POST", "/", vanilla_headers({{"My-Header1", "value1"}}),
                   my_header, empty_hash, my_header_creq("POST", "value1"),
                   "9368318c2967cf6de74404b30c65a91e8f6253e0a8659d6d5319f1a812f87d65",
                   "c5410059b04c1ee005303aed430f6e6645f61f4dc9e1461ec8f8916fdf18852c"});
  cases.push_back({"post-header-value-case", "POST", "/",
                   vanilla_headers({{"My-Header1", "VALUE1"}}), my_header, empty_hash,
                   my_header_creq("POST", "VALUE1"),
                   "d51ced243e649e3de6ef63afbbdcbca03131a21a7103a1583706a64618606a93",
                   "cdbc9802e29d2942e5e10b5bccfdd67c5f22c7c4e8ae67b53629efa58b974b7d"});
  cases.push_back(
      {"post-x-www-form-urlencoded",
       "POST",
       "/",
       {{"Content-Type", "application/x-www-form-urlencoded"},
        {"Host", "example.amazonaws.com"},
        {"X-Amz-Date", "20150830T123600Z"},
        {"Content-Length", "13"}},
       {"content-type", "host", "x-amz-date"},
       broker::base::sha256_hex("Param1=value1"),
       "POST\n/\n\ncontent-type:application/x-www-form-urlencoded\nhost:example.amazonaws.com\n"
       "x-amz-date:20150830T123600Z\n\ncontent-type;host;x-amz-date\n"
       "9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e",
       "42a5e5bb34198acb3e84da4f085bb7927f2bc277ca766e6d19c73c2154021281",
       "ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a"});
  cases.push_back({"post-sts-header-before",
                   "POST",
                   "/",
                   vanilla_headers({{"X-Amz-Security-Token", suite_token}}),
                   {"host", "x-amz-date", "x-amz-security-token"},
                   empty_hash,
                   "POST\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n"
                   "x-amz-security-token:" +
                       suite_token + "\n\nhost;x-amz-date;x-amz-security-token\n" + empty_hash,
                   "c237e1b440d4c63c32ca95b5b99481081cb7b13c7e40434868e71567c1a882f6",
                   "85d96828115b5dc0cfc3bd16ad9e210dd772bbebba041836c64533a82be05ead"});
  return cases;
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ";") + n;
  return out;
}

std::string nth_line(const std::string& text, std::size_t n) {
  std::size_t start = 0;
  for (std::size_t i = 0; i < n; ++i) start = text.find('\n', start) + 1;
  return text.substr(start, text.find('\n', start) - start);
}

}  // namespace

TEST_CASE("sigv4: the AWS test suite's canonical requests, strings to sign and signatures",
          "[brokers][sigv4]") {
  const sigv4::signing_key key(suite_secret, suite_scope);
  const auto cases = suite_cases();
  REQUIRE(cases.size() >= 20);
  for (const suite_case& c : cases) {
    INFO(c.name);
    std::string creq = sigv4::canonical_request(c.method, c.target, c.headers, c.signed_headers,
                                                c.payload_hash, "service", false);
    CHECK(creq == c.creq);
    std::string sts = sigv4::string_to_sign(suite_date, suite_scope, creq);
    CHECK(sts == suite_sts_prefix + c.sts_hash);
    std::string signature = key.sign(sts);
    CHECK(signature == c.signature);
    sigv4::authorization a{{"AKIDEXAMPLE", suite_scope}, c.signed_headers, signature};
    CHECK(sigv4::format_authorization(a) ==
          "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
          "SignedHeaders=" +
              join(c.signed_headers) + ", Signature=" + c.signature);
  }
}

TEST_CASE("sigv4: other published vectors (aws-c-auth suite, 2011 suite, botocore)",
          "[brokers][sigv4]") {
  SECTION("get-vanilla-query-order-encoded sorts by the encoded name") {
    const sigv4::signing_key key(suite_secret, suite_scope);
    std::string creq = sigv4::canonical_request(
        "GET", "/?Param-3=Value3&Param=Value2&%E1%88%B4=Value1", vanilla_headers(), host_date,
        sigv4::empty_sha256, "service", false);
    CHECK(nth_line(creq, 2) == "%E1%88%B4=Value1&Param=Value2&Param-3=Value3");
    CHECK(key.sign(sigv4::string_to_sign(suite_date, suite_scope, creq)) ==
          "371d3713e185cc334048618a97f809c9ffe339c62934c032af5a0e595648fcac");
  }
  SECTION("the 2011 suite's get-space and get-utf8 encode an encoded path again") {
    const sigv4::credential_scope scope{"20110909", "us-east-1", "host"};
    const sigv4::signing_key key(suite_secret, scope);
    const std::vector<header_field> headers{{"Date", "Mon, 09 Sep 2011 23:36:00 GMT"},
                                            {"Host", "host.foo.com"}};
    struct old_case {
      std::string target, creq_path, sts_hash, signature;
    };
    for (const old_case& c : std::vector<old_case>{
             {"/%20/foo", "/%2520/foo",
              "35975885599128f8963ce9be7219598b2b5a344321bae304529556c891e9e6ba",
              "2be9e587d1ee1f0fd02128724b86b4358ba3630d39f493b6e06610a19a50779e"},
             {"/%E1%88%B4", "/%25E1%2588%25B4",
              "47f4456c465167f4db3490a68903fe057412e6e030de38f71d9006467eb4922a",
              "57b1eb3df3b16a8479c0097b66c0b261cfd65b829419a3f2c3d05319722490b8"}}) {
      INFO(c.target);
      std::string creq = sigv4::canonical_request("GET", c.target, headers, {"date", "host"},
                                                  sigv4::empty_sha256, "host", false);
      CHECK(creq == "GET\n" + c.creq_path +
                        "\n\ndate:Mon, 09 Sep 2011 23:36:00 GMT\nhost:host.foo.com\n\ndate;host\n" +
                        empty_hash);
      std::string sts = sigv4::string_to_sign("20110909T233600Z", scope, creq);
      CHECK(sts == "AWS4-HMAC-SHA256\n20110909T233600Z\n20110909/us-east-1/host/aws4_request\n" +
                       c.sts_hash);
      CHECK(key.sign(sts) == c.signature);
    }
  }
  SECTION("botocore: S3 signs the path as sent, other services encode it again") {
    const sigv4::credential_scope s3_scope{"20210601", "us-east-1", "s3"};
    const sigv4::credential_scope service_scope{"20210601", "us-east-1", "service"};
    const std::string date = "20210601T120000Z";
    std::string s3_creq = sigv4::canonical_request("GET", "/bucket/a%20b/c~d%2Be",
                                                   {{"Host", "bucket.s3.amazonaws.com"},
                                                    {"X-Amz-Date", date},
                                                    {"X-Amz-Content-SHA256", empty_hash}},
                                                   {"host", "x-amz-content-sha256", "x-amz-date"},
                                                   sigv4::empty_sha256, "s3", false);
    CHECK(s3_creq ==
          "GET\n/bucket/a%20b/c~d%2Be\n\nhost:bucket.s3.amazonaws.com\n"
          "x-amz-content-sha256:" +
              empty_hash +
              "\nx-amz-date:20210601T120000Z\n\n"
              "host;x-amz-content-sha256;x-amz-date\n" +
              empty_hash);
    std::string s3_sts = sigv4::string_to_sign(date, s3_scope, s3_creq);
    CHECK(nth_line(s3_sts, 3) ==
          "98329112420dcd392c8408defeb68f5d997b810aab18694c3bdcceb2a76926d7");
    CHECK(sigv4::signing_key(suite_secret, s3_scope).sign(s3_sts) ==
          "e9c4593f05e544afa5009d69787e588356a004492bdd8cc63b59d22e9913210a");

    std::string creq = sigv4::canonical_request(
        "GET", "/a%20b/c", {{"Host", "example.amazonaws.com"}, {"X-Amz-Date", date}}, host_date,
        sigv4::empty_sha256, "service", false);
    CHECK(creq ==
          "GET\n/a%2520b/c\n\nhost:example.amazonaws.com\nx-amz-date:20210601T120000Z\n\n"
          "host;x-amz-date\n" +
              empty_hash);
    std::string sts = sigv4::string_to_sign(date, service_scope, creq);
    CHECK(nth_line(sts, 3) == "ff917dc8dc94e8e6a27426dcbc445107aacc774a14b8a62183cb3bb93509d1c2");
    CHECK(sigv4::signing_key(suite_secret, service_scope).sign(sts) ==
          "6c09a8a10e49dc2830dbcf501480f063ad515edcdffc45be4f4e782f6ff9e392");
  }
}

TEST_CASE("sigv4: the S3 documentation's seed signatures and presigned GET", "[brokers][sigv4]") {
  const sigv4::signing_key key(docs_secret, docs_scope);
  SECTION("chunked upload seed") {
    std::string creq = sigv4::canonical_request("PUT", "/examplebucket/chunkObject.txt",
                                                docs_chunked_headers(false), docs_chunked_signed,
                                                sigv4::streaming_signed, "s3", false);
    CHECK(creq ==
          "PUT\n/examplebucket/chunkObject.txt\n\ncontent-encoding:aws-chunked\n"
          "content-length:66824\nhost:s3.amazonaws.com\n"
          "x-amz-content-sha256:STREAMING-AWS4-HMAC-SHA256-PAYLOAD\nx-amz-date:20130524T000000Z\n"
          "x-amz-decoded-content-length:66560\nx-amz-storage-class:REDUCED_REDUNDANCY\n\n"
          "content-encoding;content-length;host;x-amz-content-sha256;x-amz-date;"
          "x-amz-decoded-content-length;x-amz-storage-class\nSTREAMING-AWS4-HMAC-SHA256-PAYLOAD");
    std::string sts = sigv4::string_to_sign(docs_date, docs_scope, creq);
    CHECK(sts ==
          "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n"
          "cee3fed04b70f867d036f722359b0b1f2f0e5dc0efadbc082b76c4c60e316455");
    CHECK(key.sign(sts) == docs_chunked_seed);
    CHECK(seed_signature(key, true) == docs_trailer_seed);
  }
  SECTION("presigned GET examplebucket/test.txt") {
    const std::string target =
        "/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F"
        "20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400"
        "&X-Amz-SignedHeaders=host&X-Amz-Signature="
        "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404";
    auto q = sigv4::parse_presigned(target);
    REQUIRE(q);
    CHECK(q->credential.access_key_id == "AKIAIOSFODNN7EXAMPLE");
    CHECK(q->credential.scope.text() == "20130524/us-east-1/s3/aws4_request");
    CHECK(q->amz_date == "20130524T000000Z");
    CHECK(q->signed_headers == std::vector<std::string>{"host"});
    CHECK(q->signature == "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404");

    std::string creq =
        sigv4::canonical_request("GET", target, {{"Host", "examplebucket.s3.amazonaws.com"}},
                                 q->signed_headers, sigv4::unsigned_payload, "s3", true);
    CHECK(creq ==
          "GET\n/test.txt\nX-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE"
          "%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires="
          "86400&X-Amz-SignedHeaders=host\nhost:examplebucket.s3.amazonaws.com\n\nhost\n"
          "UNSIGNED-PAYLOAD");
    std::string sts = sigv4::string_to_sign(q->amz_date, q->credential.scope, creq);
    CHECK(nth_line(sts, 3) == "3bfa292879f6447bbcda7001decf97f4a54dc650c8942174ae0a9121cf58ad04");
    CHECK(key.sign(sts) == q->signature);
  }
}

TEST_CASE("sigv4: canonical URI for s3 and for other services", "[brokers][sigv4]") {
  const std::vector<header_field> headers{{"Host", "h"}};
  auto uri = [&](std::string_view target, std::string_view service) {
    return nth_line(sigv4::canonical_request("GET", target, headers, {"host"}, sigv4::empty_sha256,
                                             service, false),
                    1);
  };
  CHECK(uri("/bucket/a%20b//./c/../d", "s3") == "/bucket/a%20b//./c/../d");
  CHECK(uri("/a%20b//./c/../d", "iam") == "/a%2520b/d");
  CHECK(uri("/a b+c/", "iam") == "/a%20b%2Bc/");
  CHECK(uri("/\xE1\x88\xB4", "iam") == "/%E1%88%B4");
  CHECK(uri("/..", "iam") == "/");
  CHECK(uri("?x=1", "s3") == "/");
  CHECK(uri("?x=1", "iam") == "/");
  CHECK(uri("https://example.amazonaws.com/a/b?x=1", "iam") == "/a/b");
  CHECK(uri("https://example.amazonaws.com", "iam") == "/");
}

TEST_CASE("sigv4: canonical query decodes, re-encodes and sorts", "[brokers][sigv4]") {
  const std::vector<header_field> headers{{"Host", "h"}};
  auto query = [&](std::string_view target, bool presigned) {
    return nth_line(sigv4::canonical_request("GET", target, headers, {"host"}, sigv4::empty_sha256,
                                             "s3", presigned),
                    2);
  };
  CHECK(query("/?a=%7e&a=+&c&d=x=y&e=%20&f=%2f&&b=%ZZ", false) ==
        "a=%2B&a=~&b=%25ZZ&c=&d=x%3Dy&e=%20&f=%2F");
  CHECK(query("/", false).empty());
  CHECK(query("/?", false).empty());
  CHECK(query("/?b=1&X-Amz-Signature=abc", true) == "b=1");
  CHECK(query("/?b=1&X-Amz-Signature=abc", false) == "X-Amz-Signature=abc&b=1");
}

TEST_CASE("sigv4: canonical headers", "[brokers][sigv4]") {
  const std::vector<header_field> headers{
      {"HOST", "example.com"}, {"x-a", "\t one \t two  "}, {"X-A", "three"}, {"x-b", ""}};
  std::string creq = sigv4::canonical_request("GET", "/", headers, {"host", "x-a", "x-b"},
                                              sigv4::unsigned_payload, "s3", false);
  CHECK(creq ==
        "GET\n/\n\nhost:example.com\nx-a:one two,three\nx-b:\n\nhost;x-a;x-b\n"
        "UNSIGNED-PAYLOAD");
  CHECK_THROWS_AS(sigv4::canonical_request("GET", "/", headers, {"host", "x-missing"},
                                           sigv4::unsigned_payload, "s3", false),
                  sigv4::sigv4_error);
}

TEST_CASE("sigv4: parse_authorization accepts what clients send", "[brokers][sigv4]") {
  const std::string botocore =
      "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
      "SignedHeaders=host;x-amz-date, "
      "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31";
  auto a = sigv4::parse_authorization(botocore);
  REQUIRE(a);
  CHECK(a->credential.access_key_id == "AKIDEXAMPLE");
  CHECK(a->credential.scope.date == "20150830");
  CHECK(a->credential.scope.region == "us-east-1");
  CHECK(a->credential.scope.service == "service");
  CHECK(a->signed_headers == host_date);
  CHECK(a->signature == "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
  CHECK(sigv4::format_authorization(*a) == botocore);

  // The S3 documentation's form has no spaces after the commas; any order is fine.
  auto docs = sigv4::parse_authorization(
      "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
      "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
      "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
  REQUIRE(docs);
  CHECK(docs->signed_headers.size() == 4);
  auto reordered = sigv4::parse_authorization(
      "  AWS4-HMAC-SHA256   Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763f"
      "bf31 ,SignedHeaders=host;x-amz-date,Credential=AKIDEXAMPLE/20150830/us-east-1/service/"
      "aws4_request ");
  REQUIRE(reordered);
  CHECK(sigv4::format_authorization(*reordered) == botocore);
}

TEST_CASE("sigv4: parse_authorization refuses malformed values", "[brokers][sigv4]") {
  const std::string cred = "Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request";
  const std::string heads = "SignedHeaders=host;x-amz-date";
  const std::string sig =
      "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31";
  auto parse = [](const std::string& v) { return sigv4::parse_authorization(v); };
  REQUIRE(parse("AWS4-HMAC-SHA256 " + cred + ", " + heads + ", " + sig));

  CHECK_FALSE(parse("AWS4-HMAC-SHA256 " + cred + ", " + heads));  // no Signature
  CHECK_FALSE(parse("AWS4-HMAC-SHA256 " + cred + ", " + sig));    // no headers
  CHECK_FALSE(parse("AWS4-HMAC-SHA256 " + heads + ", " + sig));   // no Credential
  CHECK_FALSE(parse("AWS4-HMAC-SHA256 " + cred + ", " + heads + ", " + sig + ", " + sig));
  CHECK_FALSE(parse("AWS4-HMAC-SHA256 " + cred + ", " + heads + ", " + sig + ", Foo=bar"));
  CHECK_FALSE(parse("AWS4-HMAC-SHA256 " + cred + ", " + heads + ", " + sig + ","));
  CHECK_FALSE(parse("AWS4-HMAC-SHA256 " + cred + ", " + heads +
                    ", Signature=" + std::string(64, 'A')));  // upper-case hex
  CHECK_FALSE(parse("AWS4-HMAC-SHA256 " + cred + ", " + heads +
                    ", Signature=" + std::string(63, 'a')));  // short
  CHECK_FALSE(parse("AWS4-HMAC-SHA256 " + cred + ", " + heads +
                    ", Signature=" + std::string(64, 'g')));  // not hex
  CHECK_FALSE(parse("AWS4-HMAC-SHA256 " + cred + ", SignedHeaders=x-amz-date;host, " + sig));
  CHECK_FALSE(parse("AWS4-HMAC-SHA256 " + cred + ", SignedHeaders=Host;x-amz-date, " + sig));
  CHECK_FALSE(parse("AWS4-HMAC-SHA256 " + cred + ", SignedHeaders=host;host, " + sig));
  CHECK_FALSE(parse("AWS4-HMAC-SHA256 " + cred + ", SignedHeaders=host;;x-amz-date, " + sig));
  CHECK_FALSE(parse("AWS4-HMAC-SHA256 " + cred + ", SignedHeaders=, " + sig));
  CHECK_FALSE(parse("AWS4-HMAC-SHA512 " + cred + ", " + heads + ", " + sig));
  CHECK_FALSE(parse("AWS4-ECDSA-P256-SHA256 " + cred + ", " + heads + ", " + sig));
  CHECK_FALSE(parse("AWS4-HMAC-SHA256" + cred + ", " + heads + ", " + sig));
  CHECK_FALSE(parse("Bearer " + cred + ", " + heads + ", " + sig));
  for (const char* scope :
       {"AKIDEXAMPLE/20150830/us-east-1/service",
        "AKIDEXAMPLE/20150830/us-east-1/service/aws4_reques",
        "AKIDEXAMPLE/2015083/us-east-1/service/aws4_request",
        "AKIDEXAMPLE/2015083x/us-east-1/service/aws4_request",
        "AKIDEXAMPLE/20150830//service/aws4_request", "/20150830/us-east-1/service/aws4_request",
        "AKIDEXAMPLE/20150830/us-east-1/service/aws4_request/x"}) {
    INFO(scope);
    CHECK_FALSE(
        parse("AWS4-HMAC-SHA256 Credential=" + std::string(scope) + ", " + heads + ", " + sig));
    CHECK_FALSE(sigv4::parse_credential(scope));
  }
}

TEST_CASE("sigv4: format_authorization round-trips", "[brokers][sigv4]") {
  sigv4::authorization a{{"AKIAEXAMPLE", {"20240102", "eu-west-3", "sts"}},
                         {"content-type", "host", "x-amz-date", "x-amz-security-token"},
                         broker::base::sha256_hex("anything")};
  std::string text = sigv4::format_authorization(a);
  CHECK(text ==
        "AWS4-HMAC-SHA256 Credential=AKIAEXAMPLE/20240102/eu-west-3/sts/aws4_request, "
        "SignedHeaders=content-type;host;x-amz-date;x-amz-security-token, Signature=" +
            a.signature);
  auto back = sigv4::parse_authorization(text);
  REQUIRE(back);
  CHECK(back->credential.access_key_id == a.credential.access_key_id);
  CHECK(back->credential.scope.text() == a.credential.scope.text());
  CHECK(back->signed_headers == a.signed_headers);
  CHECK(back->signature == a.signature);
}

TEST_CASE("sigv4: parse_presigned on a botocore URL and on malformed ones", "[brokers][sigv4]") {
  // botocore S3SigV4QueryAuth, session token "TOKEN/with+chars=", 2021-06-01T12:00:00Z.
  const std::string target =
      "/key%20name.txt?versionId=3%2F4&X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential="
      "AKIDEXAMPLE%2F20210601%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20210601T120000Z&"
      "X-Amz-Expires=3600&X-Amz-SignedHeaders=host&X-Amz-Security-Token=TOKEN%2Fwith%2Bchars%3D&"
      "X-Amz-Signature=0a90a7346687e0ffd84755a62de3a814962fb64b88f931ad36e013943e7d42f1";
  auto q = sigv4::parse_presigned(target);
  REQUIRE(q);
  CHECK(q->credential.access_key_id == "AKIDEXAMPLE");
  CHECK(q->credential.scope.service == "s3");
  CHECK(q->amz_date == "20210601T120000Z");
  std::string creq =
      sigv4::canonical_request("GET", target, {{"host", "bucket.s3.amazonaws.com"}},
                               q->signed_headers, sigv4::unsigned_payload, "s3", true);
  CHECK(nth_line(creq, 2) ==
        "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDEXAMPLE%2F20210601%2Fus-east-1%2F"
        "s3%2Faws4_request&X-Amz-Date=20210601T120000Z&X-Amz-Expires=3600&X-Amz-Security-Token="
        "TOKEN%2Fwith%2Bchars%3D&X-Amz-SignedHeaders=host&versionId=3%2F4");
  sigv4::signing_key key(suite_secret, q->credential.scope);
  CHECK(key.sign(sigv4::string_to_sign(q->amz_date, q->credential.scope, creq)) == q->signature);

  CHECK_FALSE(sigv4::parse_presigned("/key"));
  CHECK_FALSE(sigv4::parse_presigned("/key?versionId=1&X-Amz-Signature=abc"));
  const std::string good_sig =
      "X-Amz-Signature=0a90a7346687e0ffd84755a62de3a814962fb64b88f931ad36e013943e7d42f1";
  const std::string base =
      "/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDEXAMPLE%2F20210601%2Fus-east-1%2F"
      "s3%2Faws4_request&X-Amz-Date=20210601T120000Z&X-Amz-SignedHeaders=host";
  REQUIRE(sigv4::parse_presigned(base + "&" + good_sig));
  for (const std::string& bad : std::vector<std::string>{
           base,                                                    // no X-Amz-Signature
           base + "&X-Amz-Signature=" + std::string(64, 'A'),       // upper-case
           base + "&" + good_sig + "&" + good_sig,                  // twice
           base + "&" + good_sig + "&X-Amz-SignedHeaders=host",     // twice
           "/k?X-Amz-Algorithm=AWS4-HMAC-SHA1&X-Amz-Credential=x",  // another algorithm
           "/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Date=20210601T120000Z&"
           "X-Amz-SignedHeaders=host&" +
               good_sig,  // no credential
           "/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDEXAMPLE%2F20210601&"
           "X-Amz-Date=20210601T120000Z&X-Amz-SignedHeaders=host&" +
               good_sig,
           "/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDEXAMPLE%2F20210601%2Fus-east-1"
           "%2Fs3%2Faws4_request&X-Amz-Date=2021-06-01&X-Amz-SignedHeaders=host&" +
               good_sig,
           "/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDEXAMPLE%2F20210601%2Fus-east-1"
           "%2Fs3%2Faws4_request&X-Amz-Date=20210601T120000Z&X-Amz-SignedHeaders=x-b%3Bx-a&" +
               good_sig}) {
    INFO(bad);
    CHECK_THROWS_AS(sigv4::parse_presigned(bad), sigv4::sigv4_error);
  }
}

TEST_CASE("sigv4: a signature verifies only under its key and for what it signed",
          "[brokers][sigv4]") {
  const sigv4::signing_key key_a(suite_secret, suite_scope);
  const sigv4::signing_key key_b(other_secret, suite_scope);
  const std::vector<std::string> signed_headers{"host", "x-amz-content-sha256", "x-amz-date"};
  auto headers = [](std::string host, std::string content) {
    return std::vector<header_field>{{"Host", std::move(host)},
                                     {"X-Amz-Content-Sha256", std::move(content)},
                                     {"X-Amz-Date", "20150830T123600Z"},
                                     {"User-Agent", "unsigned"}};
  };
  auto sign = [&](const sigv4::signing_key& key, const std::vector<header_field>& h,
                  std::string_view payload, std::string_view target = "/path?x=1") {
    return key.sign(sigv4::string_to_sign(
        suite_date, suite_scope,
        sigv4::canonical_request("PUT", target, h, signed_headers, payload, "service", false)));
  };
  const std::string payload = broker::base::sha256_hex("body");
  const std::string sent = sign(key_a, headers("example.amazonaws.com", payload), payload);

  CHECK(sigv4::signatures_equal(sent,
                                sign(key_a, headers("example.amazonaws.com", payload), payload)));
  CHECK_FALSE(sigv4::signatures_equal(
      sent, sign(key_b, headers("example.amazonaws.com", payload), payload)));
  CHECK_FALSE(
      sigv4::signatures_equal(sent, sign(key_a, headers("evil.amazonaws.com", payload), payload)));
  const std::string other_payload = broker::base::sha256_hex("other body");
  CHECK_FALSE(sigv4::signatures_equal(
      sent, sign(key_a, headers("example.amazonaws.com", payload), other_payload)));
  CHECK_FALSE(sigv4::signatures_equal(
      sent, sign(key_a, headers("example.amazonaws.com", payload), payload, "/path?x=2")));
  // A header outside SignedHeaders may change freely.
  auto changed = headers("example.amazonaws.com", payload);
  changed.back().value = "another agent";
  CHECK(sigv4::signatures_equal(sent, sign(key_a, changed, payload)));
  // The scope is part of the key: the same secret for another service is another key.
  const sigv4::signing_key key_iam(suite_secret, {"20150830", "us-east-1", "iam"});
  CHECK_FALSE(sigv4::signatures_equal(
      sent,
      key_iam.sign(sigv4::string_to_sign(
          suite_date, suite_scope,
          sigv4::canonical_request("PUT", "/path?x=1", headers("example.amazonaws.com", payload),
                                   signed_headers, payload, "service", false)))));

  CHECK_FALSE(sigv4::signatures_equal(sent, sent.substr(0, 63)));
  CHECK_FALSE(sigv4::signatures_equal(sent, ""));
}

TEST_CASE("sigv4: sha256 one-shot and incremental", "[brokers][sigv4]") {
  CHECK(broker::base::sha256_hex("") == sigv4::empty_sha256);
  CHECK(broker::base::sha256_hex("abc") ==
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const std::string text(100000, 'q');
  sigv4::sha256_stream s;
  for (std::size_t at = 0; at < text.size(); at += 777)
    s.update(std::string_view(text).substr(at, 777));
  CHECK(s.hex_digest() == broker::base::sha256_hex(text));
  CHECK(s.hex_digest() == sigv4::empty_sha256);  // a finished stream starts over
}
