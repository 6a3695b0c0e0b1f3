// One coding's decoder over its library (zlib, libbrotli, libzstd), for content_decoder: the
// stages of a list of codings are chained, each decoding what the one before it produced.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "http/content_coding.hpp"

namespace broker::http {

class coding_stage {
 public:
  virtual ~coding_stage() = default;

  struct step {
    std::size_t consumed = 0;
    std::size_t produced = 0;
  };
  // Decodes from `in` into out[0, room): as much as one call of the library takes. Corrupt data
  // sets failed() and returns what was done before it.
  virtual step run(std::string_view in, char* out, std::size_t room) = 0;
  // Whether everything consumed so far has come out (the last complete unit of the format was
  // fed whole): false while the library holds input it has not decoded yet (a zstd block
  // arrives whole before any of it is decoded). Bits of one symbol do not count: a literal is
  // less than a byte of input.
  virtual bool at_boundary() const { return true; }
  // The stream ended where the format says it does (input after it is corrupt, or for gzip and
  // zstd the start of another member or frame).
  virtual bool complete() const = 0;

  bool failed() const { return !error_.empty(); }
  const std::string& error() const { return error_; }

 protected:
  void fail(std::string why) { error_ = std::move(why); }

 private:
  std::string error_;
};

std::unique_ptr<coding_stage> make_stage(content_coding c);

}  // namespace broker::http
