// Coded bodies for the decoder's tests, made with the libraries' own encoders (zlib, libzstd,
// libbrotli), and data to code.
#pragma once

#include <brotli/encode.h>
#include <zlib.h>
#include <zstd.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "http/content_coding.hpp"

namespace broker::test {

// zlib's deflate with the gzip wrapper (window bits 15 + 16) or the zlib one (15); level 0
// stores the data as it is.
inline std::string zlib_encode(std::string_view data, bool gzip, int level = 6) {
  z_stream z{};
  if (deflateInit2(&z, level, Z_DEFLATED, gzip ? 31 : 15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("deflateInit2");
  std::string out(deflateBound(&z, data.size()) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) throw std::runtime_error("deflate");
  return out;
}

// A raw deflate stream, without the zlib wrapper RFC 9110's "deflate" has.
inline std::string raw_deflate(std::string_view data) {
  z_stream z{};
  deflateInit2(&z, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, data.size()) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

inline std::string zstd_encode(std::string_view data, int level = 3, int window_log = 0) {
  ZSTD_CCtx* c = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, level);
  if (window_log) ZSTD_CCtx_setParameter(c, ZSTD_c_windowLog, window_log);
  std::string out(ZSTD_compressBound(data.size()), '\0');
  const std::size_t n = ZSTD_compress2(c, out.data(), out.size(), data.data(), data.size());
  ZSTD_freeCCtx(c);
  if (ZSTD_isError(n)) throw std::runtime_error("ZSTD_compress2");
  out.resize(n);
  return out;
}

inline std::string brotli_encode(std::string_view data, int quality = 5) {
  std::size_t size = BrotliEncoderMaxCompressedSize(data.size()) + 16;
  std::string out(size, '\0');
  if (!BrotliEncoderCompress(quality, BROTLI_DEFAULT_WINDOW, BROTLI_MODE_GENERIC, data.size(),
                             reinterpret_cast<const std::uint8_t*>(data.data()), &size,
                             reinterpret_cast<std::uint8_t*>(out.data())))
    throw std::runtime_error("BrotliEncoderCompress");
  out.resize(size);
  return out;
}

inline std::string encode(http::content_coding c, std::string_view data) {
  switch (c) {
    case http::content_coding::gzip:
      return zlib_encode(data, true);
    case http::content_coding::deflate:
      return zlib_encode(data, false);
    case http::content_coding::br:
      return brotli_encode(data);
    case http::content_coding::zstd:
      return zstd_encode(data);
  }
  throw std::logic_error("coding");
}

// `applied` in order, first applied first (as a Content-Encoding list names them).
inline std::string encode_all(const std::vector<http::content_coding>& applied, std::string data) {
  for (auto c : applied) data = encode(c, data);
  return data;
}

// Bytes no coding can shrink (each stores them as they are), from a fixed seed.
inline std::string incompressible(std::size_t n, std::uint64_t seed = 7) {
  std::string out(n, '\0');
  for (auto& ch : out) {
    seed = seed * 6364136223846793005u + 1442695040888963407u;
    ch = static_cast<char>(seed >> 56);
  }
  return out;
}

// JSON-ish text that codes well, as an API request body does.
inline std::string sample_text(std::size_t n) {
  std::string out;
  for (int i = 0; out.size() < n; ++i)
    out += R"({"role":"user","content":"turn )" + std::to_string(i) + R"( of the conversation"},)";
  out.resize(n);
  return out;
}

inline constexpr http::content_coding all_codings[] = {
    http::content_coding::gzip, http::content_coding::deflate, http::content_coding::br,
    http::content_coding::zstd};

}  // namespace broker::test
