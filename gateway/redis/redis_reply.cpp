#include "gateway/redis/redis_reply.hpp"

namespace broker::gateway {

bool redis_reply::is_error(std::string_view code) const {
  return is_error() && text.starts_with(code) &&
         (text.size() == code.size() || text[code.size()] == ' ');
}

const redis_reply& redis_reply::checked() const& {
  if (is_error()) throw redis_error(text);
  return *this;
}

redis_reply redis_reply::checked() && {
  if (is_error()) throw redis_error(text);
  return std::move(*this);
}

}  // namespace broker::gateway
