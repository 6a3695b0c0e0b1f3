// GraphQL's lexical grammar and the shape of an executable document (brokers/graphql.hpp).
#include "brokers/graphql.hpp"

#include <cstdint>
#include <set>

#include <nlohmann/json.hpp>

namespace broker::brokers {
namespace {

// A document longer than this is not judged (GitHub refuses queries far shorter).
constexpr std::size_t max_document = 1024 * 1024;
constexpr std::size_t max_depth = 256;

enum class token_kind { end, punctuator, name, number, string };

struct token {
  token_kind kind = token_kind::end;
  std::string_view text;  // the punctuator ("{", "..."), the name, the number; strings: ""
};

bool is_name_start(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_name_char(char c) {
  return is_name_start(c) || is_digit(c);
}
bool is_hex(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

class lexer {
 public:
  explicit lexer(std::string_view text) : s_(text) {
    if (s_.starts_with("\xEF\xBB\xBF")) at_ = 3;  // UnicodeBOM
  }

  // The next token, or nullopt with error_ set.
  std::optional<token> next() {
    skip_ignored();
    if (at_ >= s_.size()) return token{};
    const char c = s_[at_];
    if (std::string_view("!$&()=:@[]{}|").find(c) != std::string_view::npos)
      return token{token_kind::punctuator, s_.substr(at_++, 1)};
    if (c == '.') {
      if (s_.substr(at_, 3) != "...") return fail("a '.' that does not begin \"...\"");
      at_ += 3;
      return token{token_kind::punctuator, s_.substr(at_ - 3, 3)};
    }
    if (is_name_start(c)) {
      const std::size_t from = at_;
      while (at_ < s_.size() && is_name_char(s_[at_])) ++at_;
      return token{token_kind::name, s_.substr(from, at_ - from)};
    }
    if (c == '-' || is_digit(c)) return number();
    if (c == '"') return s_.substr(at_, 3) == "\"\"\"" ? block_string() : string();
    return fail("a character outside GraphQL's grammar");
  }

  const std::string& error() const { return error_; }

 private:
  std::optional<token> fail(std::string why) {
    error_ = std::move(why) + " at offset " + std::to_string(at_);
    return std::nullopt;
  }

  void skip_ignored() {
    while (at_ < s_.size()) {
      const char c = s_[at_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',') {
        ++at_;
      } else if (c == '#') {  // a comment runs to the end of its line
        while (at_ < s_.size() && s_[at_] != '\n' && s_[at_] != '\r') ++at_;
      } else if (s_.substr(at_, 3) == "\xEF\xBB\xBF") {
        at_ += 3;
      } else {
        return;
      }
    }
  }

  // IntValue and FloatValue (§2.9.1, §2.9.2): no leading zeros, and neither may be followed by
  // a '.' or a name start.
  std::optional<token> number() {
    const std::size_t from = at_;
    if (s_[at_] == '-') ++at_;
    if (at_ >= s_.size() || !is_digit(s_[at_])) return fail("a '-' without digits");
    if (s_[at_] == '0') {
      ++at_;
      if (at_ < s_.size() && is_digit(s_[at_])) return fail("a number with a leading zero");
    } else {
      while (at_ < s_.size() && is_digit(s_[at_])) ++at_;
    }
    if (at_ < s_.size() && s_[at_] == '.') {
      ++at_;
      if (at_ >= s_.size() || !is_digit(s_[at_])) return fail("a fraction without digits");
      while (at_ < s_.size() && is_digit(s_[at_])) ++at_;
    }
    if (at_ < s_.size() && (s_[at_] == 'e' || s_[at_] == 'E')) {
      ++at_;
      if (at_ < s_.size() && (s_[at_] == '+' || s_[at_] == '-')) ++at_;
      if (at_ >= s_.size() || !is_digit(s_[at_])) return fail("an exponent without digits");
      while (at_ < s_.size() && is_digit(s_[at_])) ++at_;
    }
    if (at_ < s_.size() && (s_[at_] == '.' || is_name_start(s_[at_])))
      return fail("a number followed by '.' or a name");
    return token{token_kind::number, s_.substr(from, at_ - from)};
  }

  // "..." (§2.9.4): no line terminator inside; escapes \" \\ \/ \b \f \n \r \t, \uXXXX and
  // \u{X...} (a Unicode scalar value).
  std::optional<token> string() {
    ++at_;
    while (at_ < s_.size()) {
      const char c = s_[at_];
      if (c == '"') {
        ++at_;
        return token{token_kind::string, {}};
      }
      if (c == '\n' || c == '\r') return fail("a line break inside a string");
      if (c != '\\') {
        ++at_;
        continue;
      }
      if (at_ + 1 >= s_.size()) break;
      const char e = s_[at_ + 1];
      if (std::string_view("\"\\/bfnrt").find(e) != std::string_view::npos) {
        at_ += 2;
        continue;
      }
      if (e != 'u') return fail("an unknown escape in a string");
      at_ += 2;
      if (at_ < s_.size() && s_[at_] == '{') {
        ++at_;
        std::uint32_t value = 0;
        std::size_t digits = 0;
        while (at_ < s_.size() && is_hex(s_[at_]) && digits < 7) {
          const char h = s_[at_++];
          value = value * 16 +
                  static_cast<std::uint32_t>(is_digit(h) ? h - '0' : (h | 0x20) - 'a' + 10);
          ++digits;
        }
        if (digits == 0 || at_ >= s_.size() || s_[at_] != '}' || value > 0x10FFFF ||
            (value >= 0xD800 && value <= 0xDFFF))
          return fail("a \\u{...} escape that is no Unicode scalar value");
        ++at_;
        continue;
      }
      for (int i = 0; i < 4; ++i, ++at_)
        if (at_ >= s_.size() || !is_hex(s_[at_])) return fail("a \\u escape without 4 hex digits");
    }
    return fail("a string that does not end");
  }

  // """...""" (§2.9.4): anything but """ , which \""" escapes.
  std::optional<token> block_string() {
    at_ += 3;
    while (at_ < s_.size()) {
      if (s_.substr(at_, 4) == "\\\"\"\"") {
        at_ += 4;
      } else if (s_.substr(at_, 3) == "\"\"\"") {
        at_ += 3;
        return token{token_kind::string, {}};
      } else {
        ++at_;
      }
    }
    return fail("a block string that does not end");
  }

  std::string_view s_;
  std::size_t at_ = 0;
  std::string error_;
};

bool is_open(std::string_view p) {
  return p == "{" || p == "(" || p == "[";
}
char closer(std::string_view p) {
  return p == "{" ? '}' : p == "(" ? ')' : ']';
}

}  // namespace

std::optional<graphql_document> parse_graphql_document(std::string_view text, std::string& error) {
  if (text.size() > max_document) {
    error = "a document longer than 1 MiB";
    return std::nullopt;
  }
  lexer lex(text);
  graphql_document doc;
  // Each definition: its leading tokens up to its selection set, which is read to its close.
  std::optional<token> t = lex.next();
  while (t && t->kind != token_kind::end) {
    if (t->kind == token_kind::punctuator && t->text == "{") {
      doc.operations.push_back(graphql_operation::query);  // the query shorthand
    } else if (t->kind == token_kind::name && t->text == "query") {
      doc.operations.push_back(graphql_operation::query);
    } else if (t->kind == token_kind::name && t->text == "mutation") {
      doc.operations.push_back(graphql_operation::mutation);
    } else if (t->kind == token_kind::name && t->text == "subscription") {
      doc.operations.push_back(graphql_operation::subscription);
    } else if (t->kind == token_kind::name && t->text == "fragment") {
      // a fragment: only the selection set matters, as for an operation
    } else {
      error = "a definition that is neither an operation nor a fragment";
      return std::nullopt;
    }
    // Up to the selection set: the '{' outside every bracket of variables, arguments and
    // directives (a default value may be an object: "($a: In = {x: 1})").
    std::string open;  // the closers expected, innermost last
    bool in_selection = false;
    for (;;) {
      if (!t) break;
      if (t->kind == token_kind::end) {
        error = "a definition without its selection set, or an unclosed bracket";
        return std::nullopt;
      }
      if (t->kind == token_kind::punctuator && is_open(t->text)) {
        if (open.empty() && t->text == "{") in_selection = true;
        if (open.size() >= max_depth) {
          error = "brackets nested deeper than 256";
          return std::nullopt;
        }
        open.push_back(closer(t->text));
      } else if (t->kind == token_kind::punctuator &&
                 (t->text == "}" || t->text == ")" || t->text == "]")) {
        if (open.empty() || open.back() != t->text[0]) {
          error = "an unbalanced '" + std::string(t->text) + "'";
          return std::nullopt;
        }
        open.pop_back();
        if (open.empty() && in_selection) break;
      }
      t = lex.next();
    }
    if (!t) break;
    t = lex.next();
  }
  if (!t) {
    error = lex.error();
    return std::nullopt;
  }
  if (doc.operations.empty()) {
    error = "a document without an operation";
    return std::nullopt;
  }
  return doc;
}

std::string graphql_body_not_read_only(std::string_view body) {
  // A repeated member anywhere is refused: servers differ on which of two "query" members wins.
  std::vector<std::set<std::string>> keys;  // of each object being read, innermost last
  bool repeated = false;
  auto no_repeats = [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using event_t = nlohmann::json::parse_event_t;
    if (event == event_t::object_start) keys.emplace_back();
    if (event == event_t::object_end && !keys.empty()) keys.pop_back();
    if (event == event_t::key && !keys.empty() && parsed.is_string() &&
        !keys.back().insert(parsed.get<std::string>()).second)
      repeated = true;
    return true;
  };
  nlohmann::json shape;
  try {
    shape = nlohmann::json::parse(body, no_repeats);
  } catch (const nlohmann::json::exception&) {
    return "the body is not JSON (GraphQL requests are judged as JSON bodies only)";
  }
  if (repeated) return "the body repeats a member of one object";
  std::vector<const nlohmann::json*> requests;
  if (shape.is_object()) {
    requests.push_back(&shape);
  } else if (shape.is_array() && !shape.empty()) {
    for (const auto& r : shape) {
      if (!r.is_object()) return "a batch member that is not an object";
      requests.push_back(&r);
    }
  } else {
    return "the body is neither a request object nor a batch of them";
  }
  for (const nlohmann::json* r : requests) {
    auto query = r->find("query");
    if (query == r->end() || !query->is_string())
      return "a request without a \"query\" document (a persisted query names a document the "
             "broker cannot see)";
    std::string error;
    auto doc = parse_graphql_document(query->get_ref<const std::string&>(), error);
    if (!doc) return "the query document does not parse: " + error;
    for (graphql_operation op : doc->operations)
      if (op != graphql_operation::query)
        return op == graphql_operation::mutation ? "the document holds a mutation"
                                                 : "the document holds a subscription";
  }
  return "";
}

}  // namespace broker::brokers
