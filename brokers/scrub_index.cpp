// One pass over a text for any number of scrub patterns (see scrub_index.hpp).
#include "brokers/scrub_index.hpp"

#include <string.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace broker::brokers {
namespace {

constexpr std::size_t not_found = std::string_view::npos;
// Pattern and slot numbers are 32-bit.
constexpr std::size_t max_count = std::numeric_limits<std::uint32_t>::max();
// The hashed window: one unaligned 32-bit load.
constexpr std::size_t gram = 4;
// The widest step between hashed text positions. Wider hashes fewer positions but costs a slot
// per pattern and offset, built for every scrubber; 16 covers patterns up to 19 bytes, past
// which the scan is no longer what a pass costs (copying the text out is).
constexpr std::size_t max_stride = 16;
// automatic: up to this many patterns, memmem each (it skips ahead by about a pattern's length,
// which a handful of passes over the text does not lose to hashing).
constexpr std::size_t max_direct = 2;
// Filter bits per slot, as a power of two: 2^5 keeps a random text position's chance of a false
// hit near 1/32.
constexpr unsigned filter_bits_per_slot = 5;

std::uint64_t gram_hash(const char* p) {
  std::uint32_t g;
  std::memcpy(&g, p, gram);
  return std::uint64_t{g} * 0x9E3779B97F4A7C15u;
}

// The first of p, p + stride, ... up to last whose gram's bit is set in the filter; past last if
// none. The loop the scan spends its time in: its state stays in registers.
std::size_t skip_to_hit(const char* data, std::size_t p, std::size_t last, std::size_t stride,
                        const std::uint64_t* filter, unsigned shift) {
  for (; p <= last; p += stride) {
    const std::uint64_t bit = gram_hash(data + p) >> shift;
    if (filter[bit >> 6] >> (bit & 63) & 1) break;
  }
  return p;
}

std::size_t find_from(std::string_view text, std::string_view needle, std::size_t from) {
  if (from >= text.size() || text.size() - from < needle.size()) return not_found;
  const void* hit = ::memmem(text.data() + from, text.size() - from, needle.data(), needle.size());
  return hit ? static_cast<std::size_t>(static_cast<const char*>(hit) - text.data()) : not_found;
}

// What a byte at the end of a text that may go on is, for the hold-back (hold_from). The bytes of
// the tokens that brokered values are made of (base62, base64 in both alphabets, percent-encoded
// forms, JWTs) are always held. A value with a byte of another class adds that whole class: what
// a child can learn by timing held bytes is which of the other classes some value has a byte of,
// never which value, which byte or where. Line ends are `other`: a stream of events (SSE, NDJSON)
// is held back nowhere unless a value holds a control byte.
enum class held_class : std::uint8_t { token, punctuation, blank, other };

constexpr held_class class_of(unsigned char c) {
  if ((c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'))
    return held_class::token;
  switch (c) {
    case '-':
    case '.':
    case '_':
    case '~':
    case '+':
    case '/':
    case '=':
    case '%':
      return held_class::token;
    case ' ':
    case '\t':
      return held_class::blank;
    default:
      return c > 0x20 && c < 0x7f ? held_class::punctuation : held_class::other;
  }
}

// Each byte's class, looked up: an index is built for every answer and every record, and its
// held classes are a bit each rather than a table of 256 made each time.
constexpr auto byte_classes = [] {
  std::array<std::uint8_t, 256> classes{};
  for (std::size_t b = 0; b < classes.size(); ++b)
    classes[b] = static_cast<std::uint8_t>(class_of(static_cast<unsigned char>(b)));
  return classes;
}();

constexpr std::uint8_t class_bit(char c) {
  return static_cast<std::uint8_t>(1u << byte_classes[static_cast<unsigned char>(c)]);
}

template <class T>
void cleanse(std::vector<T>& v) {
  if (!v.empty()) ::explicit_bzero(v.data(), v.size() * sizeof(T));
}

}  // namespace

scrub_index::scrub_index(std::vector<scrub_pattern> patterns, search how)
    : patterns_(std::move(patterns)) {
  if (patterns_.size() >= max_count) throw std::invalid_argument("too many scrub patterns");
  std::size_t shortest_hashed = 0;
  held_classes_ = class_bit('a');  // token bytes are always held
  for (const scrub_pattern& p : patterns_) {
    if (p.find.empty()) throw std::invalid_argument("scrub pattern is empty");
    if (p.replacement.size() != p.find.size())
      throw std::invalid_argument("scrub replacement differs in length from its pattern");
    longest_ = std::max(longest_, p.find.size());
    for (const char c : p.find) held_classes_ |= class_bit(c);
    if (p.find.size() >= gram)
      shortest_hashed =
          shortest_hashed == 0 ? p.find.size() : std::min(shortest_hashed, p.find.size());
  }
  if (how == search::automatic)
    how = patterns_.size() <= max_direct ? search::direct : search::hashed;
  if (how == search::direct) shortest_hashed = 0;
  for (std::size_t i = 0; i < patterns_.size(); ++i)
    if (shortest_hashed == 0 || patterns_[i].find.size() < gram)
      direct_.push_back(static_cast<std::uint32_t>(i));
  if (shortest_hashed != 0) build(shortest_hashed);
}

scrub_index::~scrub_index() {
  cleanse(filter_);
  cleanse(buckets_);
  cleanse(slots_);
}

void scrub_index::build(std::size_t shortest_hashed) {
  stride_ = std::clamp(shortest_hashed - (gram - 1), std::size_t{1}, max_stride);
  const std::size_t count = (patterns_.size() - direct_.size()) * stride_;
  if (count + 1 >= max_count) throw std::invalid_argument("too many scrub patterns");
  const unsigned log = static_cast<unsigned>(std::bit_width(count - 1));  // ceil(log2(count))
  const unsigned filter_bits = std::clamp(log + filter_bits_per_slot, 10u, 20u);
  const unsigned bucket_bits = std::clamp(log, 4u, 16u);
  filter_shift_ = 64 - filter_bits;
  bucket_shift_ = 64 - bucket_bits;
  filter_.assign(std::size_t{1} << (filter_bits - 6), 0);
  buckets_.assign(std::size_t{1} << bucket_bits, 0);
  slots_.reserve(count + 1);
  slots_.push_back({0, 0, 0});  // slot 0 ends every chain
  // Locals: stores through the tables may alias members of the same types.
  std::uint64_t* filter = filter_.data();
  std::uint32_t* buckets = buckets_.data();
  const unsigned filter_shift = filter_shift_, bucket_shift = bucket_shift_;
  const std::size_t stride = stride_;
  for (std::size_t i = 0; i < patterns_.size(); ++i) {
    const std::string_view find = patterns_[i].find;
    if (find.size() < gram) continue;
    for (std::size_t offset = 0; offset < stride; ++offset) {
      const std::uint64_t h = gram_hash(find.data() + offset);
      const std::uint64_t bit = h >> filter_shift;
      filter[bit >> 6] |= std::uint64_t{1} << (bit & 63);
      std::uint32_t& bucket = buckets[h >> bucket_shift];
      const auto at = static_cast<std::uint32_t>(slots_.size());
      slots_.push_back({static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(offset), bucket});
      bucket = at;
    }
  }
}

std::optional<scrub_match> scrub_index::find(std::string_view text, std::size_t from,
                                             cursor& at) const {
  std::optional<scrub_match> best;
  const auto consider = [&](std::size_t start, std::size_t i) {
    if (best && start == best->start) {
      const std::size_t size = patterns_[i].find.size();
      const std::size_t best_size = patterns_[best->pattern].find.size();
      if (size < best_size || (size == best_size && i > best->pattern)) return;
    } else if (best && start > best->start) {
      return;
    }
    best = scrub_match{start, i};
  };

  for (std::size_t k = 0; k < direct_.size(); ++k) {
    std::size_t& next = at.next_[k];
    if (next == cursor::unknown || next < from)
      next = find_from(text, patterns_[direct_[k]].find, from);
    if (next != not_found) consider(next, direct_[k]);
  }
  if (slots_.empty() || text.size() < gram) return best;

  const char* data = text.data();
  const std::size_t size = text.size();
  const std::uint64_t* filter = filter_.data();
  // The starts found at p lie in (p - stride_, p]: past best->start + stride_ - 1 none wins.
  std::size_t last = size - gram;
  if (best) last = std::min(last, best->start + stride_ - 1);
  for (std::size_t p = (from + stride_ - 1) / stride_ * stride_;; p += stride_) {
    p = skip_to_hit(data, p, last, stride_, filter, filter_shift_);
    if (p > last) break;
    const std::uint64_t h = gram_hash(data + p);
    bool found = false;
    for (std::uint32_t k = buckets_[h >> bucket_shift_]; k != 0; k = slots_[k].next) {
      const slot& s = slots_[k];
      if (s.offset > p || p - s.offset < from) continue;
      const std::size_t start = p - s.offset;
      const std::string_view find = patterns_[s.pattern].find;
      if (find.size() > size - start || std::memcmp(data + p, find.data() + s.offset, gram) != 0 ||
          std::memcmp(data + start, find.data(), find.size()) != 0)
        continue;
      consider(start, s.pattern);
      found = true;
    }
    if (found) break;  // later positions find only later starts
  }
  return best;
}

void scrub_index::each_occurrence(std::string_view text, void (*report)(void*, std::size_t),
                                  void* found) const {
  for (std::uint32_t i : direct_) {
    const std::string_view find = patterns_[i].find;
    for (std::size_t at = find_from(text, find, 0); at != not_found;
         at = find_from(text, find, at + 1))
      report(found, i);
  }
  if (slots_.empty() || text.size() < gram) return;
  // An occurrence starting at s is seen once: at p, the multiple of stride_ in [s, s + stride_),
  // through the slot of its offset p - s.
  const char* data = text.data();
  const std::size_t size = text.size(), last = size - gram;
  for (std::size_t p = 0;; p += stride_) {
    p = skip_to_hit(data, p, last, stride_, filter_.data(), filter_shift_);
    if (p > last) break;
    const std::uint64_t h = gram_hash(data + p);
    for (std::uint32_t k = buckets_[h >> bucket_shift_]; k != 0; k = slots_[k].next) {
      const slot& s = slots_[k];
      if (s.offset > p) continue;
      const std::size_t start = p - s.offset;
      const std::string_view find = patterns_[s.pattern].find;
      if (find.size() <= size - start && std::memcmp(data + start, find.data(), find.size()) == 0)
        report(found, s.pattern);
    }
  }
}

bool scrub_index::holds(char c) const {
  return (held_classes_ & class_bit(c)) != 0;
}

std::size_t scrub_index::hold_from(std::string_view text, std::size_t from) const {
  const std::size_t n = text.size();
  const std::size_t first = std::max(from, n >= longest_ ? n - longest_ + 1 : 0);
  std::size_t q = n;
  while (q > first && holds(text[q - 1])) --q;
  return q;
}

}  // namespace broker::brokers
