#include "gateway/redis/redis_protocol.hpp"

#include <hiredis/hiredis.h>
#include <openssl/crypto.h>

#include <memory>
#include <new>
#include <stdexcept>

namespace broker::gateway {
namespace {

redis_reply convert(const redisReply& in) {
  redis_reply out;
  switch (in.type) {
    case REDIS_REPLY_INTEGER:
      out.type = redis_reply::kind::integer;
      out.integer = in.integer;
      break;
    case REDIS_REPLY_STRING:
      out.type = redis_reply::kind::string;
      out.text.assign(in.str, in.len);
      break;
    case REDIS_REPLY_STATUS:
      out.type = redis_reply::kind::status;
      out.text.assign(in.str, in.len);
      break;
    case REDIS_REPLY_ERROR:
      out.type = redis_reply::kind::error;
      out.text.assign(in.str, in.len);
      break;
    case REDIS_REPLY_ARRAY:
      out.type = redis_reply::kind::array;
      out.elements.reserve(in.elements);
      for (std::size_t i = 0; i < in.elements; ++i) out.elements.push_back(convert(*in.element[i]));
      break;
    default:  // REDIS_REPLY_NIL (a nil bulk string or a nil array)
      break;
  }
  return out;
}

}  // namespace

void append_command(std::string& out, const std::vector<std::string>& args) {
  if (args.empty()) throw std::invalid_argument("redis: an empty command");
  std::vector<const char*> argv;
  std::vector<std::size_t> lengths;
  argv.reserve(args.size());
  lengths.reserve(args.size());
  for (const auto& a : args) {
    argv.push_back(a.data());
    lengths.push_back(a.size());
  }
  char* formatted = nullptr;
  const int size = redisFormatCommandArgv(&formatted, static_cast<int>(argv.size()), argv.data(),
                                          lengths.data());
  if (size < 0 || formatted == nullptr) throw std::bad_alloc();
  out.append(formatted, static_cast<std::size_t>(size));
  OPENSSL_cleanse(formatted, static_cast<std::size_t>(size));
  redisFreeCommand(formatted);
}

reply_reader::reply_reader() : reader_(redisReaderCreate()) {
  if (reader_ == nullptr) throw std::bad_alloc();
}

reply_reader::~reply_reader() {
  redisReaderFree(reader_);
}

bool reply_reader::feed(const char* data, std::size_t size) {
  if (failed()) return false;
  return redisReaderFeed(reader_, data, size) == REDIS_OK;
}

std::optional<redis_reply> reply_reader::next() {
  if (failed()) return std::nullopt;
  void* raw = nullptr;
  if (redisReaderGetReply(reader_, &raw) != REDIS_OK || raw == nullptr) return std::nullopt;
  const std::unique_ptr<redisReply, void (*)(void*)> reply(static_cast<redisReply*>(raw),
                                                           freeReplyObject);
  return convert(*reply);
}

bool reply_reader::failed() const {
  return reader_->err != 0;
}

std::string reply_reader::error() const {
  return reader_->errstr;
}

std::size_t reply_reader::buffered() const {
  return reader_->buf == nullptr ? 0 : reader_->len - reader_->pos;
}

}  // namespace broker::gateway
