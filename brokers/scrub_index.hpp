// The patterns of a scrubber, indexed so that one pass over a text finds the leftmost match of
// any of them, whatever their number (the approach of value_catalog's index, in
// credential_set_catalog.hpp, kept in match order). A scrubber is made per request or response;
// the index is immutable, so one built once can be shared by all the scrubbers that need it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace broker::brokers {

struct scrub_pattern {
  std::string_view find;         // non-empty; must outlive the scrubber (and the index)
  std::string_view replacement;  // same length as find
};

struct scrub_match {
  std::size_t start = 0;    // where in the text
  std::size_t pattern = 0;  // its index in patterns()
};

class scrub_index {
 public:
  // How the patterns are searched. hashed: one 4-byte hash per stride bytes of text (stride up
  // to the shortest indexed pattern's length - 3), verified against the patterns it may start;
  // patterns under 4 bytes are searched one by one. direct: each pattern by itself with memmem,
  // which costs nothing to set up and wins for one or two patterns. automatic picks by count.
  enum class search : std::uint8_t { automatic, hashed, direct };

  // Throws std::invalid_argument for an empty pattern or a replacement of another length.
  explicit scrub_index(std::vector<scrub_pattern> patterns, search how = search::automatic);
  ~scrub_index();  // wipes the index: its hashes are derived from the patterns' bytes
  scrub_index(const scrub_index&) = delete;
  scrub_index& operator=(const scrub_index&) = delete;

  const std::vector<scrub_pattern>& patterns() const { return patterns_; }
  std::size_t longest() const { return longest_; }
  bool hashed() const { return !slots_.empty(); }

  // Scratch for find() over one text: where each pattern searched by itself occurs next. Reset
  // it before searching another text (or the same text after it changed).
  class cursor {
   public:
    void reset(const scrub_index& index) { next_.assign(index.direct_.size(), unknown); }

   private:
    friend class scrub_index;
    static constexpr std::size_t unknown = static_cast<std::size_t>(-2);
    std::vector<std::size_t> next_;
  };

  // The leftmost match in `text` that starts at or after `from` and fits in it; of those
  // starting there the longest, then the lowest index. Successive calls on one text must not
  // move `from` backwards.
  std::optional<scrub_match> find(std::string_view text, std::size_t from, cursor& at) const;
  // Where a text that may go on is cut: the earliest position at or after `from`, and no more
  // than longest() - 1 bytes before its end, from which every byte of `text` is one that
  // holds() (text.size() if its last byte is not). A match that could end past the text starts
  // at or after it, since patterns are made of such bytes. What decides it is public, never
  // whether the bytes begin a pattern: the scrubber is no oracle for the values it hides
  // (docs/policy.md).
  std::size_t hold_from(std::string_view text, std::size_t from) const;
  // Whether a byte at the end of a text that may go on is held back: every byte of the class
  // (held_class) of a byte of some pattern, and the token bytes always.
  bool holds(char c) const;

  // Every occurrence of every pattern in `text`, overlapping ones included: found(pattern
  // index) once per occurrence, in no particular order. find() gives the match to replace; a
  // decision about the whole text (which value it carries) needs them all.
  template <class Found>
  void each(std::string_view text, Found found) const {
    each_occurrence(
        text, [](void* f, std::size_t i) { (*static_cast<Found*>(f))(i); }, &found);
  }

 private:
  void build(std::size_t shortest_hashed);
  void each_occurrence(std::string_view text, void (*report)(void*, std::size_t),
                       void* found) const;

  std::vector<scrub_pattern> patterns_;
  std::size_t longest_ = 0;
  std::uint8_t held_classes_ = 0;      // a bit for each held_class (scrub_index.cpp) held
  std::vector<std::uint32_t> direct_;  // patterns searched by themselves, by index

  // A pattern of length L >= stride_ + 3 that starts at s has, at offset p - s < stride_, the 4
  // bytes at p, the multiple of stride_ in [s, s + stride_). Each (pattern, offset) is a slot,
  // chained from the bucket of its 4-byte gram's hash; a bit filter over more hash bits rejects
  // most text positions with one load. The slots hold no pattern bytes: a hit is verified
  // against the pattern itself.
  struct slot {
    std::uint32_t pattern;
    std::uint32_t offset;
    std::uint32_t next;  // next slot in the bucket; 0 (a slot that is none) ends it
  };
  std::size_t stride_ = 1;
  unsigned filter_shift_ = 64;  // a hash's top (64 - shift) bits pick its filter bit
  unsigned bucket_shift_ = 64;  // ... and its bucket
  std::vector<std::uint64_t> filter_;
  std::vector<std::uint32_t> buckets_;
  std::vector<slot> slots_;  // empty unless hashed()
};

}  // namespace broker::brokers
