// A file's bytes read whole, and a file written with its missing directories made: what the
// tests of code that reads and puts back files check with.
#pragma once

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace broker::test {

inline std::string read_all(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

inline void write_file(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

}  // namespace broker::test
