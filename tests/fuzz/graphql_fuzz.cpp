// The GraphQL reader behind "graphql": "read" scopes (brokers/graphql.hpp). Input: a document.
// It never crashes or hangs, and what it reads cannot hide an operation: a mutation placed
// after a document that parses (on a new line) or before it is always found, and the
// HTTP body judge agrees with the document reader.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "brokers/graphql.hpp"
#include "fuzz_support.hpp"

namespace {

using namespace broker;
using brokers::graphql_operation;
using fuzz::check;

bool only_queries(const brokers::graphql_document& doc) {
  for (graphql_operation op : doc.operations)
    if (op != graphql_operation::query) return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::string error;
  const auto doc = brokers::parse_graphql_document(text, error);
  check(doc ? !doc->operations.empty() : !error.empty(), "a document has operations or an error");

  // The body judge: the same verdict for the document in a JSON request (when it is text JSON
  // can carry).
  nlohmann::json request{{"query", text}};
  std::string body;
  try {
    body = request.dump();
  } catch (const nlohmann::json::exception&) {
    return 0;  // not UTF-8
  }
  const bool passes = brokers::graphql_body_not_read_only(body).empty();
  check(passes == (doc && only_queries(*doc)), "the body judge agrees with the document reader");
  if (!doc) return 0;

  std::string after_error;
  const auto after = brokers::parse_graphql_document(text + "\nmutation { x }", after_error);
  check(!after || !only_queries(*after), "a mutation after a document is seen");
  const auto before = brokers::parse_graphql_document("mutation { x }\n" + text, after_error);
  check(!before || !only_queries(*before), "a mutation before a document is seen");
  return 0;
}
