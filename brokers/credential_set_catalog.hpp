// Internal to credential_set: the values a request must not carry (real values; dummies of
// credentials not usable at the destination), each in the forms a hostile child could hide it in
// (DESIGN §5), and an index that finds every form of every value in a text in one pass.
//
// The forms are computed once, when the catalog is made: the value itself, its base64 fragments
// (RFC 4648 §4 and §5 alphabets, at the three byte alignments: see base64_fragment) and its
// percent-encodings (RFC 3986 §2.1: every byte, or all but unreserved ones; either hex case).
// Finding a base64- or percent-encoded value is then a plain substring search, with nothing of
// the request decoded. A catalog is immutable, so a request's decision or a body's scan can keep
// one (shared_ptr) while the set's rotated values move on.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "brokers/credential_set.hpp"

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

  // Calls found(index) for each needle that occurs in `text`, once per occurrence. Cost: one
  // hash per stride_ bytes of text, whatever the number of needles; a call only for a hit.
  template <class Found>
  void scan(std::string_view text, Found found) const;

 private:
  void add_forms(std::string_view value, std::uint32_t index);
  void add_needle(std::string& form, std::uint32_t value, value_form how);
  void build_index();

  std::string arena_;  // every form back to back; reserved once, so the views never move
  std::vector<value_info> values_;
  std::vector<std::string_view> plain_;  // values_[i] itself, in the arena
  std::vector<needle> needles_;

  // The index: a needle of length L >= stride_ + 3 has, at one of its first stride_ offsets,
  // the 4 bytes found at a text position that is a multiple of stride_; those 4-byte grams are
  // hashed into a bit filter, and each (gram hash, needle, offset) is a slot to verify.
  struct slot {
    std::uint16_t key;
    std::uint16_t offset;
    std::uint32_t needle;
  };
  static constexpr std::size_t gram = 4;
  static std::uint16_t gram_key(const char* p) {
    std::uint32_t g;
    std::memcpy(&g, p, gram);
    return static_cast<std::uint16_t>((g * 0x9E3779B1u) >> 16);
  }
  std::size_t stride_ = 1;
  std::size_t shortest_ = 0;                  // no text shorter than every needle is scanned
  std::array<std::uint64_t, 1024> filter_{};  // 2^16 bits
  std::vector<slot> slots_;                   // sorted by key
  std::vector<std::uint32_t> short_;          // needles under 4 bytes: plain find()
};

template <class Found>
void value_catalog::scan(std::string_view text, Found found) const {
  if (needles_.empty() || text.size() < shortest_) return;
  for (std::uint32_t i : short_)
    if (text.find(needles_[i].text) != std::string_view::npos) found(i);
  // An occurrence starting at s covers the hashed position p, the multiple of stride_ in
  // [s, s + stride_): its gram at offset p - s is a slot.
  const char* data = text.data();
  const std::size_t size = text.size();
  for (std::size_t p = 0; p + gram <= size; p += stride_) {
    const std::uint16_t key = gram_key(data + p);
    if ((filter_[key >> 6] >> (key & 63) & 1) == 0) continue;
    auto at = std::lower_bound(slots_.begin(), slots_.end(), key,
                               [](const slot& s, std::uint16_t k) { return s.key < k; });
    for (; at != slots_.end() && at->key == key; ++at) {
      if (at->offset > p) continue;
      const std::size_t start = p - at->offset;
      const std::string_view n = needles_[at->needle].text;
      if (start + n.size() <= size && std::memcmp(data + start, n.data(), n.size()) == 0)
        found(at->needle);
    }
  }
}

// The catalog of a set's rotated values (credential_set::rotated_catalog), remade when they
// change; requests on any thread share it.
struct credential_set::rotated_cache {
  std::mutex mutex;
  std::shared_ptr<const value_catalog> catalog;
};

}  // namespace broker::brokers
