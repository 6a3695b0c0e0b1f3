// What the fuzz targets share: stopping a run when a promised property does not hold, split
// points derived from the input itself, and a reader of control bytes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string_view>
#include <vector>

namespace broker::fuzz {

// A property the code under test promises did not hold: libFuzzer saves the input as a crash.
[[noreturn]] inline void fail(const char* what) {
  std::fprintf(stderr, "fuzz: property violated: %s\n", what);
  std::fflush(stderr);
  __builtin_trap();
}

inline void check(bool holds, const char* what) {
  if (!holds) fail(what);
}

// FNV-1a: a seed that follows the input, so a mutated input also splits differently.
inline std::uint64_t hash_of(std::string_view data) {
  std::uint64_t h = 0xcbf29ce484222325u;
  for (unsigned char c : data) h = (h ^ c) * 0x100000001b3u;
  return h;
}

// splitmix64: spreads one seed over several choices.
inline std::uint64_t next_random(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15u);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}

// `data` cut at 1-4 positions chosen by `seed`, in order. Pieces may be empty (a read that
// decoded to nothing is fed too), and their concatenation is `data`.
inline std::vector<std::string_view> pieces_of(std::string_view data, std::uint64_t seed) {
  std::vector<std::size_t> cuts;
  const std::size_t count = 1 + next_random(seed) % 4;
  for (std::size_t i = 0; i < count; ++i) cuts.push_back(next_random(seed) % (data.size() + 1));
  std::sort(cuts.begin(), cuts.end());
  std::vector<std::string_view> pieces;
  std::size_t from = 0;
  for (std::size_t cut : cuts) {
    pieces.push_back(data.substr(from, cut - from));
    from = cut;
  }
  pieces.push_back(data.substr(from));
  return pieces;
}

// One byte a piece: every boundary at once.
inline std::vector<std::string_view> bytes_of(std::string_view data) {
  std::vector<std::string_view> pieces;
  for (std::size_t i = 0; i < data.size(); ++i) pieces.push_back(data.substr(i, 1));
  return pieces;
}

// Control bytes taken from the front of an input; past its end every read yields zeros.
class byte_reader {
 public:
  explicit byte_reader(std::string_view data) : data_(data) {}

  std::uint8_t byte() {
    if (data_.empty()) return 0;
    const auto b = static_cast<std::uint8_t>(data_.front());
    data_.remove_prefix(1);
    return b;
  }
  std::uint16_t u16() {
    const std::uint16_t high = byte();
    return static_cast<std::uint16_t>(high << 8 | byte());
  }
  std::string_view bytes(std::size_t n) {
    const std::string_view taken = data_.substr(0, n);
    data_.remove_prefix(taken.size());
    return taken;
  }
  std::string_view rest() const { return data_; }

 private:
  std::string_view data_;
};

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace broker::fuzz
