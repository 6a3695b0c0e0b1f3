// Internal to credential_set: the values a request must not carry (real values; dummies of
// credentials not usable at the destination), each in the forms a hostile child could hide it in
// (docs/policy.md), and an index that finds every form of every value in a text in one pass.
//
// The forms are computed once, when the catalog is made: the value itself, its base64 fragments
// (RFC 4648 §4 and §5 alphabets, at the three byte alignments: see base64_fragment) and its
// percent-encodings (RFC 3986 §2.1: every byte, or all but unreserved ones; either hex case).
// Finding a base64- or percent-encoded value is then a plain substring search, with nothing of
// the request decoded. A catalog is immutable, so a request's decision or a body's scan can keep
// one (shared_ptr) while the set's rotated values move on.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "brokers/credential_set.hpp"
#include "brokers/scrub_index.hpp"

namespace broker::brokers {

// How a value's bytes appear where they were found. Ordered: a finding in a plainer form is
// reported first.
enum class value_form : std::uint8_t { plain, base64, percent };

class value_catalog {
 public:
  struct entry {
    std::string_view value;       // copied into the catalog
    request_action action;        // what finding it means
    std::string_view credential;  // copied
    std::size_t owner = 0;        // the caller's tag: which credential it belongs to
  };
  struct value_info {
    request_action action;
    std::string credential;
    std::size_t owner;
  };
  struct needle {
    std::string_view text;  // one form of values()[value]; views into the catalog
    std::uint32_t value;
    value_form form;
  };

  explicit value_catalog(const std::vector<entry>& entries);
  ~value_catalog();  // wipes every form: they are as secret as the values
  value_catalog(const value_catalog&) = delete;
  value_catalog& operator=(const value_catalog&) = delete;

  const std::vector<value_info>& values() const { return values_; }
  const std::vector<needle>& needles() const { return needles_; }
  // Does the catalog hold exactly these values and names, in this order? (The rotated values'
  // catalog is remade only when they change.)
  bool holds(const std::vector<std::pair<std::string_view, std::string_view>>& values) const;

  // Calls found(index) for each needle that occurs in `text`, once per occurrence: one pass
  // over the text whatever the number of needles (scrub_index::each).
  template <class Found>
  void scan(std::string_view text, Found found) const {
    if (index_ && text.size() >= shortest_)
      index_->each(text, [&](std::size_t i) { found(static_cast<std::uint32_t>(i)); });
  }

 private:
  void add_forms(std::string_view value, std::uint32_t index);
  void add_needle(std::string& form, std::uint32_t value, value_form how);

  std::string arena_;  // every form back to back; reserved once, so the views never move
  std::vector<value_info> values_;
  std::vector<std::string_view> plain_;  // values_[i] itself, in the arena
  std::vector<needle> needles_;
  std::size_t shortest_ = 0;            // no text shorter than every needle is scanned
  std::unique_ptr<scrub_index> index_;  // over needles_, in their order; null when none
};

// The catalog of a set's rotated values (credential_set::rotated_catalog), remade when they
// change; requests on any thread share it.
struct credential_set::rotated_cache {
  std::mutex mutex;
  std::shared_ptr<const value_catalog> catalog;
};

}  // namespace broker::brokers
