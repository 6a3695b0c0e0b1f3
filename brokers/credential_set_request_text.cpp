// The searchable text of one request head (see credential_set_request_text.hpp). A request with
// nothing to decode, no Basic credential and no repeated field allocates only the list of views.
#include "brokers/credential_set_request_text.hpp"

#include <array>
#include <stdexcept>

#include "base/secret.hpp"
#include "base/text.hpp"
#include "brokers/families.hpp"

namespace broker::brokers {
namespace {

constexpr std::size_t npos = std::string_view::npos;

// How repeated fields may be joined by whoever reads them (see the header).
constexpr std::array<std::string_view, 4> separators{", ", ",", "; ", ""};

bool has_percent(std::string_view s) {
  return s.find('%') != npos;
}

bool is_basic(std::string_view value) {
  const std::size_t start = value.find_first_not_of(" \t");  // parse only what may be one
  if (start == npos || (value[start] != 'B' && value[start] != 'b')) return false;
  auto auth = parse_auth_value(value);
  return auth && http::iequals(auth->scheme, "basic");
}

std::uint32_t name_place(std::size_t field) {
  return static_cast<std::uint32_t>(2 + 2 * field);
}
std::uint32_t value_place(std::size_t field) {
  return static_cast<std::uint32_t>(3 + 2 * field);
}

// The fields repeated under one name (compared case-insensitively, RFC 9110 §5.1), each group
// in field order. Empty, and allocating nothing, when every name is distinct.
std::vector<std::vector<std::size_t>> repeated_fields(
    const std::vector<http::header_field>& headers) {
  std::vector<std::vector<std::size_t>> groups;
  auto same = [&](std::size_t a, std::size_t b) {
    return headers[a].name.size() == headers[b].name.size() &&
           http::iequals(headers[a].name, headers[b].name);
  };
  for (std::size_t i = 0; i < headers.size(); ++i) {
    bool first = true;
    for (std::size_t j = 0; j < i && first; ++j) first = !same(i, j);
    if (!first) continue;
    std::vector<std::size_t> group;
    for (std::size_t j = i + 1; j < headers.size(); ++j) {
      if (!same(i, j)) continue;
      if (group.empty()) group.push_back(i);
      group.push_back(j);
    }
    if (!group.empty()) groups.push_back(std::move(group));
  }
  return groups;
}

// What joining each group of repeated fields copies, with every separator (twice when a value
// is percent-encoded: joined, then decoded).
std::size_t joined_size(const std::vector<http::header_field>& headers,
                        const std::vector<std::vector<std::size_t>>& groups) {
  std::size_t copies = 0;
  for (const auto& group : groups) {
    std::size_t values = 0;
    bool percent = false;
    for (std::size_t i : group) {
      values += headers[i].value.size();
      percent = percent || has_percent(headers[i].value);
    }
    for (std::string_view separator : separators) {
      const std::size_t joined = values + (group.size() - 1) * separator.size();
      copies += percent ? 2 * joined : joined;
    }
  }
  return copies;
}

}  // namespace

request_text::request_text(std::string_view target, const std::vector<http::header_field>& headers)
    : headers_(headers) {
  const std::size_t question = target.find('?');
  const std::string_view path = target.substr(0, question);
  const std::string_view query =
      question == npos ? std::string_view() : target.substr(question + 1);

  // First the texts as sent, with a pending entry (its source, to be decoded) for each copy to
  // make, adding up what the copies need at most (a decoded text is never longer than its
  // source) so that copies_ is allocated once; then the copies.
  std::size_t copies = 0;
  texts_.reserve(4 + 3 * headers.size());
  auto add = [&](std::string_view bytes, std::uint32_t place, std::uint8_t how) {
    texts_.push_back({bytes, place, how, pending::none});
    if (has_percent(bytes)) {
      // The target's decoding is what any server does to it, no evasion to name.
      texts_.push_back({bytes, place, place < 2 ? how : percent_decoded, pending::percent});
      copies += bytes.size();
    }
  };
  add(path, 0, 0);
  if (!query.empty()) add(query, 1, 0);
  for (std::size_t i = 0; i < headers.size(); ++i) {
    const http::header_field& h = headers[i];
    add(h.name, name_place(i), 0);
    add(h.value, value_place(i), 0);
    if (is_basic(h.value)) {
      texts_.push_back({h.value, value_place(i), 0, pending::basic});
      copies += h.value.size();
    }
  }
  const auto groups = repeated_fields(headers);
  copies += joined_size(headers, groups);
  if (copies == 0) return;
  copies_.reserve(copies);
  make_copies();
  for (const auto& group : groups)
    for (std::string_view separator : separators)
      add_joined(group, separator, value_place(group.front()));
}

void request_text::make_copies() {
  for (text& t : texts_) {
    if (t.source == pending::percent) {
      t.bytes = decode(t.bytes);
    } else if (t.source == pending::basic) {
      const std::size_t at = copies_.size();
      if (auto basic = decode_basic(t.bytes)) {
        copies_.append(*basic);
        base::wipe(*basic);
      }
      t.bytes = std::string_view(copies_).substr(at);
    }
    t.source = pending::none;
  }
}

request_text::~request_text() {
  base::wipe(copies_);
}

std::string_view request_text::decode(std::string_view raw) {
  if (copies_.capacity() - copies_.size() < raw.size())
    throw std::logic_error("request_text: copies exceed their reserved size");
  const std::size_t at = copies_.size();
  base::append_percent_decoded(copies_, raw);
  return std::string_view(copies_).substr(at);
}

void request_text::add_joined(const std::vector<std::size_t>& fields, std::string_view separator,
                              std::uint32_t place) {
  std::size_t size = (fields.size() - 1) * separator.size();
  for (std::size_t i : fields) size += headers_[i].value.size();
  if (copies_.capacity() - copies_.size() < size)
    throw std::logic_error("request_text: copies exceed their reserved size");
  const std::size_t at = copies_.size();
  for (std::size_t i : fields) {
    if (i != fields.front()) copies_.append(separator);
    copies_.append(headers_[i].value);
  }
  const std::string_view joined_text = std::string_view(copies_).substr(at);
  texts_.push_back({joined_text, place, joined, pending::none});
  if (has_percent(joined_text))
    texts_.push_back({decode(joined_text), place, joined | percent_decoded, pending::none});
}

std::string request_text::where(std::uint32_t place) const {
  if (place == 0) return "path";
  if (place == 1) return "query";
  if (place % 2 == 0) return "header name";
  return "header " + base::lower(headers_[(place - 3) / 2].name);
}

}  // namespace broker::brokers
