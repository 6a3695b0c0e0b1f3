// A fresh directory under the temp dir for one test, removed with everything in it at scope exit.
#pragma once

#include <stdlib.h>
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

namespace broker::test {

struct temp_dir {
  std::filesystem::path path;
  temp_dir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "broker-test-XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path = pattern;
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
};

}  // namespace broker::test
