#include "config/located_json.hpp"

#include <algorithm>
#include <iterator>

#include "config/policy.hpp"

namespace broker::config {
namespace {

using nlohmann::json;

std::string escape_pointer_token(std::string_view token) {  // RFC 6901 §3
  std::string out;
  for (char c : token) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

// "" is a legal JSON key; spelled as itself it would leave the error naming no key ("FILE:3:
// unknown key") or a parent with a trailing dot.
std::string member_key(const std::string& parent, std::string_view name) {
  const std::string spelled = name.empty() ? "<empty key>" : std::string(name);
  return parent.empty() ? spelled : parent + "." + spelled;
}

std::string element_key(const std::string& parent, std::size_t index) {
  return parent + "[" + std::to_string(index) + "]";
}

// Maps byte offsets to 1-based line numbers.
class line_index {
 public:
  explicit line_index(std::string_view text) : text_(text) {
    for (std::size_t i = 0; i < text.size(); ++i)
      if (text[i] == '\n') newlines_.push_back(i);
  }

  // The line of the last non-blank byte before `consumed`: the lexer may have read one byte
  // past a number, and that byte may be the newline ending its line.
  int line_before(std::size_t consumed) const {
    std::size_t pos = std::min(consumed, text_.size());
    while (pos > 0 && is_blank(text_[pos - 1])) --pos;
    if (pos == 0) return 1;
    auto before = std::lower_bound(newlines_.begin(), newlines_.end(), pos - 1);
    return static_cast<int>(before - newlines_.begin()) + 1;
  }

 private:
  static bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

  std::string_view text_;
  std::vector<std::size_t> newlines_;
};

// An input iterator over the text that records how far the lexer has read, which is the only
// position information a SAX callback can get from nlohmann.
class counting_iterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  counting_iterator(const char* begin, const char* at, std::size_t* furthest)
      : begin_(begin), at_(at), furthest_(furthest) {}

  reference operator*() const { return *at_; }
  counting_iterator& operator++() {
    ++at_;
    *furthest_ = std::max(*furthest_, static_cast<std::size_t>(at_ - begin_));
    return *this;
  }
  counting_iterator operator++(int) {
    counting_iterator old = *this;
    ++*this;
    return old;
  }
  friend bool operator==(const counting_iterator& a, const counting_iterator& b) {
    return a.at_ == b.at_;
  }

 private:
  const char* begin_;
  const char* at_;
  std::size_t* furthest_;
};

// What one policy text may ask the builder to keep. Every value's pointer and error key spells
// its whole path, so their bytes grow with nesting and with key length: without a bound, a 1 MiB
// file of nested brackets (or one long key above many values) needs gigabytes. Real policies
// nest a few levels and name keys in a few bytes.
constexpr std::size_t max_depth = 32;
constexpr std::size_t max_key_bytes = 256;
constexpr std::size_t max_path_bytes = 32 * 1024 * 1024;  // all pointers recorded, together

// Builds the DOM like nlohmann's own SAX DOM parser, and records each value's line under its
// JSON pointer: a member's line is its key's, an array element's is where the element starts.
class located_builder {
 public:
  using number_integer_t = json::number_integer_t;
  using number_unsigned_t = json::number_unsigned_t;
  using number_float_t = json::number_float_t;
  using string_t = json::string_t;
  using binary_t = json::binary_t;

  located_builder(located_json& out, const line_index& lines, const std::size_t& consumed)
      : out_(out), lines_(lines), consumed_(consumed) {}

  bool null() { return place(json(nullptr)); }
  bool boolean(bool v) { return place(json(v)); }
  bool number_integer(number_integer_t v) { return place(json(v)); }
  bool number_unsigned(number_unsigned_t v) { return place(json(v)); }
  bool number_float(number_float_t v, const string_t&) { return place(json(v)); }
  bool string(string_t& v) { return place(json(std::move(v))); }
  bool binary(binary_t& v) { return place(json(std::move(v))); }

  bool start_object(std::size_t) { return open(json::object()); }
  bool start_array(std::size_t) { return open(json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(string_t& name) {
    frame& f = stack_.back();
    int line = lines_.line_before(consumed_);
    if (name.size() > max_key_bytes)
      throw policy_error(out_.source, line, innermost_key(),
                         "a key longer than " + std::to_string(max_key_bytes) + " bytes");
    f.member_pointer = f.pointer + "/" + escape_pointer_token(name);
    f.member_key = member_key(f.key, name);
    if (f.node->contains(name))
      throw policy_error(out_.source, line, f.member_key, "duplicate key");
    record(f.member_pointer, line);
    f.member = std::move(name);
    return true;
  }

  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& ex) {
    // what() is "[json.exception.parse_error.101] parse error at line L, column C: MESSAGE";
    // keep MESSAGE, the line is computed the same way as for every other error.
    std::string message = ex.what();
    std::size_t at = message.find("parse error");
    std::size_t colon = at == std::string::npos ? at : message.find(": ", at);
    if (colon != std::string::npos) message = message.substr(colon + 2);
    throw policy_error(out_.source, lines_.line_before(position), innermost_key(), message);
  }

 private:
  struct frame {
    json* node = nullptr;
    std::string pointer;
    std::string key;
    std::size_t next_index = 0;  // arrays
    std::string member;          // objects: the key whose value comes next
    std::string member_pointer;
    std::string member_key;
  };

  struct placed {
    json* node;
    std::string pointer;
    std::string key;
  };

  placed insert(json&& value) {
    if (stack_.empty()) {
      out_.root = std::move(value);
      out_.lines[""] = lines_.line_before(consumed_);
      return {&out_.root, "", ""};
    }
    frame& f = stack_.back();
    if (f.node->is_array()) {
      std::string pointer = f.pointer + "/" + std::to_string(f.next_index);
      record(pointer, lines_.line_before(consumed_));
      std::string key = element_key(f.key, f.next_index++);
      f.node->push_back(std::move(value));
      return {&f.node->back(), std::move(pointer), std::move(key)};
    }
    json& slot = (*f.node)[f.member];
    slot = std::move(value);
    return {&slot, f.member_pointer, f.member_key};
  }

  bool place(json&& value) {
    insert(std::move(value));
    return true;
  }

  bool open(json&& container) {
    if (stack_.size() >= max_depth)
      throw policy_error(out_.source, lines_.line_before(consumed_), innermost_key(),
                         "nested deeper than " + std::to_string(max_depth) + " levels");
    placed p = insert(std::move(container));
    frame f;
    f.node = p.node;
    f.pointer = std::move(p.pointer);
    f.key = std::move(p.key);
    stack_.push_back(std::move(f));
    return true;
  }

  bool close() {
    stack_.pop_back();
    return true;
  }

  void record(const std::string& pointer, int line) {
    path_bytes_ += pointer.size();
    if (path_bytes_ > max_path_bytes)
      throw policy_error(out_.source, line, innermost_key(),
                         "too many values under long keys for a policy file");
    out_.lines[pointer] = line;
  }

  std::string innermost_key() const {
    if (stack_.empty()) return "(document)";
    const frame& f = stack_.back();
    if (f.node->is_array()) return element_key(f.key, f.next_index);
    if (!f.member_key.empty()) return f.member_key;
    return f.key.empty() ? "(document)" : f.key;
  }

  located_json& out_;
  const line_index& lines_;
  const std::size_t& consumed_;
  std::vector<frame> stack_;
  std::size_t path_bytes_ = 0;
};

const char* type_noun(const json& v) {
  switch (v.type()) {
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "an array";
    case json::value_t::string:
      return "a string";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::null:
      return "null";
    default:
      return "a number";
  }
}

}  // namespace

located_json parse_located_json(std::string_view text, const std::string& source) {
  located_json out;
  out.source = source;
  line_index lines(text);
  std::size_t consumed = 0;
  located_builder builder(out, lines, consumed);
  const char* begin = text.data();
  counting_iterator first(begin, begin, &consumed);
  counting_iterator last(begin, begin + text.size(), &consumed);
  json::sax_parse(first, last, &builder, nlohmann::json::input_format_t::json,
                  /*strict=*/true, /*ignore_comments=*/true);
  return out;
}

json_node::json_node(const located_json& doc) : json_node(&doc, &doc.root, "", "(document)", 1) {}

json_node::json_node(const located_json* doc, const nlohmann::json* value, std::string pointer,
                     std::string key, int fallback_line)
    : doc_(doc), value_(value), pointer_(std::move(pointer)), key_(std::move(key)) {
  auto it = doc_->lines.find(pointer_);
  line_ = it == doc_->lines.end() ? fallback_line : it->second;
}

void json_node::fail(const std::string& message) const {
  throw policy_error(doc_->source, line_, key_, message);
}

std::optional<json_node> json_node::find(std::string_view name) const {
  if (!value_->is_object()) return std::nullopt;
  auto it = value_->find(name);
  if (it == value_->end()) return std::nullopt;
  std::string parent = pointer_.empty() && key_ == "(document)" ? "" : key_;
  return json_node(doc_, &*it, pointer_ + "/" + escape_pointer_token(name),
                   member_key(parent, name), line_);
}

std::vector<std::pair<std::string, json_node>> json_node::members(const char* expected) const {
  expect_object(expected);
  std::vector<std::pair<std::string, json_node>> out;
  for (auto it = value_->begin(); it != value_->end(); ++it)
    out.emplace_back(it.key(), *find(it.key()));
  return out;
}

void json_node::reject_unknown_keys(std::initializer_list<std::string_view> known) const {
  for (auto it = value_->begin(); value_->is_object() && it != value_->end(); ++it) {
    if (std::find(known.begin(), known.end(), it.key()) != known.end()) continue;
    std::string list;
    for (std::string_view k : known) list += (list.empty() ? "" : ", ") + std::string(k);
    find(it.key())->fail("unknown key (expected one of: " + list + ")");
  }
}

std::vector<json_node> json_node::elements(const char* expected) const {
  if (!value_->is_array()) fail(expected);
  std::vector<json_node> out;
  for (std::size_t i = 0; i < value_->size(); ++i)
    out.push_back(json_node(doc_, &(*value_)[i], pointer_ + "/" + std::to_string(i),
                            element_key(key_, i), line_));
  return out;
}

void json_node::expect_object(const char* expected) const {
  if (!value_->is_object()) fail(std::string(expected) + ", got " + type_noun(*value_));
}

std::string json_node::as_string() const {
  if (!value_->is_string()) fail(std::string("expected string, got ") + type_noun(*value_));
  return value_->get<std::string>();
}

bool json_node::as_bool() const {
  if (!value_->is_boolean()) fail(std::string("expected true or false, got ") + type_noun(*value_));
  return value_->get<bool>();
}

std::vector<std::pair<std::string, json_node>> json_node::string_elements() const {
  auto items = elements("expected array of strings");
  for (const auto& item : items)
    if (!item.value().is_string()) fail("expected array of strings");
  if (items.empty()) fail("expected a non-empty array of strings");
  std::vector<std::pair<std::string, json_node>> out;
  for (const auto& item : items) out.emplace_back(item.value().get<std::string>(), item);
  return out;
}

}  // namespace broker::config
