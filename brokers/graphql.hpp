// What a GraphQL request would do, for a credential scoped to "graphql": "read"
// (docs/policy.md). Debian has no GraphQL parser library, so the lexical grammar of the GraphQL
// specification (October 2021, §2.1) is written here: ignored tokens (BOM, white space, line
// terminators, commas, '#' comments), punctuators, names, numbers, strings with their escapes
// and block strings with \""" . An executable document is then read as definitions:
// operations (a bare selection set is a query) and fragments; anything else (type system
// definitions, a token outside the grammar, unbalanced brackets) is an error, and an error
// is a refusal.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace broker::brokers {

enum class graphql_operation { query, mutation, subscription };

struct graphql_document {
  std::vector<graphql_operation> operations;  // in the order they appear; never empty
};

// The operations of one document, or nullopt with `error` set (a sentence, never a value).
std::optional<graphql_document> parse_graphql_document(std::string_view text, std::string& error);

// A GraphQL-over-HTTP request body: a JSON object with a "query" string (and "operationName",
// "variables", "extensions"), or an array of such objects (a batch). Returns "" when every
// operation of every document is a query, else why not: a mutation or subscription (whichever
// operation the request names: a document that holds one is refused whole), a request without
// a query document (a persisted query's hash names a document the broker cannot see), a
// repeated member, or a body that is not such JSON.
std::string graphql_body_not_read_only(std::string_view body);

}  // namespace broker::brokers
