// The encoded forms of the values a request must not carry, and the one-pass index over them
// (see credential_set_catalog.hpp).
#include "brokers/credential_set_catalog.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "base/secret.hpp"
#include "base/text.hpp"

namespace broker::brokers {
namespace {

// A base64 fragment this short decides under 48 bits: ordinary base64 text (a digest, an
// image) would hold one by chance. Brokered values are at least 8 bytes, whose fragments are
// at least 10 characters; only shorter values go without.
constexpr std::size_t min_fragment = 8;
// An upper bound of the bytes add_forms() appends for a value of `size` bytes: the value, six
// fragments of at most 4 * size / 3 + 3 characters, four percent-encodings of at most 3 * size.
std::size_t forms_size(std::size_t size) {
  return size + 6 * (4 * size / 3 + 3) + 4 * 3 * size;
}

}  // namespace

value_catalog::value_catalog(const std::vector<entry>& entries) {
  std::size_t total = 0;
  for (const entry& e : entries) total += forms_size(e.value.size());
  arena_.reserve(total);
  values_.reserve(entries.size());
  plain_.reserve(entries.size());
  for (const entry& e : entries) {
    if (e.value.empty()) throw std::invalid_argument("value_catalog: an empty value");
    values_.push_back({e.action, std::string(e.credential), e.owner});
    add_forms(e.value, static_cast<std::uint32_t>(values_.size() - 1));
  }
  if (needles_.empty()) return;
  std::vector<scrub_pattern> patterns;
  patterns.reserve(needles_.size());
  for (const needle& n : needles_) {
    patterns.push_back({n.text, n.text});
    shortest_ = shortest_ == 0 ? n.text.size() : std::min(shortest_, n.text.size());
  }
  index_ = std::make_unique<scrub_index>(std::move(patterns), scrub_index::search::hashed);
}

value_catalog::~value_catalog() {
  base::wipe(arena_);
}

// Each form is built in its own string (initialized, never assigned: a moved short string
// leaves its bytes behind) and wiped once copied.
void value_catalog::add_forms(std::string_view value, std::uint32_t index) {
  std::string plain(value);
  add_needle(plain, index, value_form::plain);
  plain_.push_back(needles_.back().text);
  for (std::size_t offset = 0; offset < 3; ++offset) {
    for (base::base64_alphabet alphabet :
         {base::base64_alphabet::standard, base::base64_alphabet::url}) {
      std::string fragment = base::base64_fragment(value, offset, alphabet);
      if (fragment.size() < min_fragment)
        base::wipe(fragment);
      else
        add_needle(fragment, index, value_form::base64);
    }
  }
  // Every byte escaped (what evades a search for the value), then the usual escaping of all
  // but unreserved characters (a form or query encoder's output; the value itself when it has
  // none to escape). Each in both hex cases.
  for (bool keep_unreserved : {false, true}) {
    for (bool lower_hex : {false, true}) {
      std::string escaped = base::percent_escape(value, keep_unreserved, lower_hex);
      add_needle(escaped, index, value_form::percent);
    }
  }
}

// Appends `form` to the arena as a needle of `value`, then wipes it (so does a duplicate).
void value_catalog::add_needle(std::string& form, std::uint32_t value, value_form how) {
  // A form equal to one already held for this value (both alphabets agree when the fragment
  // has no '+' or '/'; a value with nothing to escape) adds nothing.
  for (const needle& n : needles_) {
    if (n.value == value && n.text == form) {
      base::wipe(form);
      return;
    }
  }
  if (arena_.size() + form.size() > arena_.capacity()) {
    base::wipe(form);
    throw std::logic_error("value_catalog: forms exceed their reserved size");
  }
  const std::size_t at = arena_.size();
  arena_.append(form);
  base::wipe(form);
  needles_.push_back({std::string_view(arena_).substr(at, arena_.size() - at), value, how});
}

bool value_catalog::holds(
    const std::vector<std::pair<std::string_view, std::string_view>>& values) const {
  if (values.size() != values_.size()) return false;
  for (std::size_t i = 0; i < values.size(); ++i)
    if (plain_[i] != values[i].first || values_[i].credential != values[i].second) return false;
  return true;
}

}  // namespace broker::brokers
