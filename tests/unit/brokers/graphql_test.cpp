#include "brokers/graphql.hpp"

#include <catch2/catch.hpp>

#include <string>

using broker::brokers::graphql_body_not_read_only;
using broker::brokers::graphql_operation;
using broker::brokers::parse_graphql_document;

namespace {

std::string body(const std::string& query) {
  std::string escaped;
  for (char c : query) {
    if (c == '"' || c == '\\') escaped += '\\';
    if (c == '\n') {
      escaped += "\\n";
      continue;
    }
    escaped += c;
  }
  return R"({"query": ")" + escaped + R"(", "variables": {}})";
}

bool read_only(const std::string& query) {
  return graphql_body_not_read_only(body(query)).empty();
}

}  // namespace

TEST_CASE("graphql: queries pass, in every spelling", "[brokers][graphql]") {
  CHECK(read_only("{ viewer { login } }"));
  CHECK(read_only("query { viewer { login } }"));
  CHECK(
      read_only("query Q($n: Int = 3, $o: In = {a: [1, 2], b: \"x\"}) @d(x: {y: 1}) "
                "{ repository(owner: \"o\", name: \"r\") { issues(first: $n) { ...F } } }\n"
                "fragment F on IssueConnection { nodes { title } }"));
  CHECK(read_only("# mutation { deleteRepository }\nquery { a }"));
  CHECK(read_only("query { a(s: \"mutation { x }\") }"));
  CHECK(read_only("query { a(s: \"\"\"\n } mutation { x } \\\"\"\" \"\"\") }"));
  CHECK(read_only("\xEF\xBB\xBF query, { a, b }"));
  CHECK(read_only("query { a(f: -1.5e3, i: 0, u: \"\\u00e9\\u{1F600}\") }"));
  CHECK(read_only("query A { a } query B { b }"));
  CHECK(read_only("query mutation { a }"));  // an operation named "mutation"
}

TEST_CASE("graphql: a mutation or subscription anywhere is refused", "[brokers][graphql]") {
  CHECK_FALSE(read_only("mutation { deleteRepository(input: {}) { clientMutationId } }"));
  CHECK_FALSE(read_only("query A { a } mutation B { b }"));
  CHECK_FALSE(read_only("# a comment } \nmutation { b }"));
  CHECK_FALSE(read_only("query { a(s: \"\"\" x \"\"\") } mutation { b }"));
  CHECK_FALSE(read_only("{ a } subscription { b }"));
  CHECK(graphql_body_not_read_only(body("mutation { b }")) == "the document holds a mutation");
  // Which operation the request names does not matter: the document is judged whole.
  CHECK_FALSE(graphql_body_not_read_only(
                  R"({"query": "query A { a } mutation B { b }", "operationName": "A"})")
                  .empty());
}

TEST_CASE("graphql: what cannot be judged is refused", "[brokers][graphql]") {
  for (const char* bad : {
           "",                                // no operation
           "fragment F on T { a }",           // a fragment only
           "type Query { a: Int }",           // a type system definition
           "query { a ",                      // unclosed
           "query { a ) }",                   // unbalanced
           "query { a(s: \"unterminated) }",  // string never ends
           "query { a(s: \"\"\"never ends) }",
           "query { a(s: \"bad \\q escape\") }",
           "query { a(s: \"\\u{D800}\") }",  // a surrogate is no scalar value
           "query { a(n: 01) }",             // a leading zero
           "query { a(n: 1.) }",
           "query { a(n: 1x) }",
           "query { a } ; ",  // outside the grammar
           "query { a .. }",
           "query",
       }) {
    INFO(bad);
    std::string error;
    CHECK_FALSE(parse_graphql_document(bad, error));
    CHECK_FALSE(error.empty());
    CHECK_FALSE(read_only(bad));
  }
  std::string deep = "query ";
  for (int i = 0; i < 300; ++i) deep += "{ a ";
  for (int i = 0; i < 300; ++i) deep += "} ";
  CHECK_FALSE(read_only(deep));
}

TEST_CASE("graphql: the HTTP body is read as JSON, strictly", "[brokers][graphql]") {
  CHECK(graphql_body_not_read_only(R"([{"query": "{ a }"}, {"query": "query { b }"}])").empty());
  CHECK_FALSE(
      graphql_body_not_read_only(R"([{"query": "{ a }"}, {"query": "mutation { b }"}])").empty());
  // A second "query" member: servers differ on which one wins.
  CHECK_FALSE(
      graphql_body_not_read_only(R"({"query": "{ a }", "query": "mutation { b }"})").empty());
  // A persisted query: the document is on the server, unseen.
  CHECK_FALSE(graphql_body_not_read_only(
                  R"({"extensions": {"persistedQuery": {"version": 1, "sha256Hash": "ab"}}})")
                  .empty());
  CHECK_FALSE(graphql_body_not_read_only("query { a }").empty());  // not JSON
  CHECK_FALSE(graphql_body_not_read_only("[]").empty());
  CHECK_FALSE(graphql_body_not_read_only("[1]").empty());
  CHECK_FALSE(graphql_body_not_read_only(R"({"query": 3})").empty());
}

TEST_CASE("graphql: the document's operations in order", "[brokers][graphql]") {
  std::string error;
  auto doc = parse_graphql_document(
      "{ a } mutation M { b } subscription { c } fragment F on T "
      "{ d } query { e }",
      error);
  REQUIRE(doc);
  CHECK(doc->operations ==
        std::vector<graphql_operation>{graphql_operation::query, graphql_operation::mutation,
                                       graphql_operation::subscription, graphql_operation::query});
}
