#include "http/coding_stage.hpp"

#include <brotli/decode.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <new>

namespace broker::http {
namespace {

// zlib counts in uInt; the pieces handed over are far smaller, this only keeps the casts honest.
uInt clamp(std::size_t n) {
  return static_cast<uInt>(std::min<std::size_t>(n, UINT_MAX));
}

// gzip (a member after another: RFC 1952 §2.2) and deflate (one zlib stream).
class zlib_stage final : public coding_stage {
 public:
  explicit zlib_stage(bool gzip) : gzip_(gzip) {
    // 15: the largest window the formats allow; +16: the gzip wrapper instead of zlib's.
    if (inflateInit2(&z_, gzip ? 15 + 16 : 15) != Z_OK) throw std::bad_alloc();
  }
  ~zlib_stage() override { inflateEnd(&z_); }

  step run(std::string_view in, char* out, std::size_t room) override {
    if (ended_) {
      if (in.empty()) return {};
      if (!gzip_) {
        fail("deflate data continues after the end of its stream");
        return {};
      }
      inflateReset(&z_);  // another member follows
      ended_ = false;
    }
    z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    z_.avail_in = clamp(in.size());
    z_.next_out = reinterpret_cast<Bytef*>(out);
    z_.avail_out = clamp(room);
    const uInt given_in = z_.avail_in, given_out = z_.avail_out;
    const int rc = inflate(&z_, Z_NO_FLUSH);
    const step done{given_in - z_.avail_in, given_out - z_.avail_out};
    if (rc == Z_STREAM_END)
      ended_ = true;
    else if (rc != Z_OK && rc != Z_BUF_ERROR)  // Z_BUF_ERROR: no progress possible, not an error
      fail(std::string(gzip_ ? "gzip" : "deflate") + " data is corrupt (" +
           (z_.msg ? z_.msg : "zlib error " + std::to_string(rc)) + ")");
    return done;
  }
  bool complete() const override { return ended_; }

 private:
  z_stream z_{};
  bool gzip_;
  bool ended_ = false;
};

class brotli_stage final : public coding_stage {
 public:
  brotli_stage() : state_(BrotliDecoderCreateInstance(nullptr, nullptr, nullptr)) {
    if (!state_) throw std::bad_alloc();
  }
  ~brotli_stage() override { BrotliDecoderDestroyInstance(state_); }

  step run(std::string_view in, char* out, std::size_t room) override {
    if (ended_) {
      if (!in.empty()) fail("br data continues after the end of its stream");
      return {};
    }
    std::size_t avail_in = in.size(), avail_out = room;
    const auto* next_in = reinterpret_cast<const std::uint8_t*>(in.data());
    auto* next_out = reinterpret_cast<std::uint8_t*>(out);
    // Runs until input or output space is spent; the output decoded so far is pushed out when
    // the input is (libbrotli does not keep it back in its ring buffer).
    const auto r =
        BrotliDecoderDecompressStream(state_, &avail_in, &next_in, &avail_out, &next_out, nullptr);
    if (r == BROTLI_DECODER_RESULT_ERROR)
      fail(std::string("br data is corrupt (") +
           BrotliDecoderErrorString(BrotliDecoderGetErrorCode(state_)) + ")");
    else if (r == BROTLI_DECODER_RESULT_SUCCESS)
      ended_ = true;
    return {in.size() - avail_in, room - avail_out};
  }
  bool complete() const override { return ended_; }

 private:
  BrotliDecoderState* state_;
  bool ended_ = false;
};

// libzstd decodes a block only once it has all of it (up to 128 KiB), holding the bytes
// meanwhile. Each call is given at most what the library says the current unit (frame header,
// block) still needs, so a call that takes all of it ends at a unit's end: at_boundary().
class zstd_stage final : public coding_stage {
 public:
  zstd_stage() : stream_(ZSTD_createDStream()) {
    if (!stream_) throw std::bad_alloc();
    frame_start_ = unit_left_ = ZSTD_initDStream(stream_);
    // RFC 8878 §3.1.1.1.2: decoders of the HTTP coding need not take windows over 8 MiB; a frame
    // asking for more memory than that is refused rather than allocated.
    ZSTD_DCtx_setParameter(stream_, ZSTD_d_windowLogMax, 23);
  }
  ~zstd_stage() override { ZSTD_freeDStream(stream_); }

  step run(std::string_view in, char* out, std::size_t room) override {
    const std::size_t given = std::min(in.size(), unit_left_);
    ZSTD_inBuffer input{in.data(), given, 0};
    ZSTD_outBuffer output{out, room, 0};
    const std::size_t hint = ZSTD_decompressStream(stream_, &output, &input);
    if (ZSTD_isError(hint)) {
      fail(std::string("zstd data is corrupt (") + ZSTD_getErrorName(hint) + ")");
      return {input.pos, output.pos};
    }
    if (given > 0) boundary_ = input.pos == given && given == unit_left_;
    // 0: a frame ended (and its output is out); another may follow, starting with its header.
    complete_ = hint == 0;
    unit_left_ = hint == 0 ? frame_start_ : hint;
    return {input.pos, output.pos};
  }
  bool at_boundary() const override { return boundary_; }
  bool complete() const override { return complete_; }

 private:
  ZSTD_DStream* stream_;
  std::size_t frame_start_ = 0;  // what a frame's header needs first (magic and descriptor)
  std::size_t unit_left_ = 0;
  bool boundary_ = true;
  bool complete_ = false;
};

}  // namespace

std::unique_ptr<coding_stage> make_stage(content_coding c) {
  switch (c) {
    case content_coding::gzip:
      return std::make_unique<zlib_stage>(true);
    case content_coding::deflate:
      return std::make_unique<zlib_stage>(false);
    case content_coding::br:
      return std::make_unique<brotli_stage>();
    case content_coding::zstd:
      return std::make_unique<zstd_stage>();
  }
  throw std::bad_alloc();
}

}  // namespace broker::http
