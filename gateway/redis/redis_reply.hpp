// What Redis answered, as a plain value (no hiredis types), and the two ways a command fails:
// redis_unavailable when the connection is at fault (no connection, lost, or no answer in time),
// redis_error for callers that treat an error reply as a failure (redis_reply::checked()).
// An error reply by itself is an answer, not a fault of the connection.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace broker::gateway {

// Could not connect (or log in), the connection was lost, or no answer came within the timeout.
class redis_unavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An error reply (`-ERR ...`, `-WRONGTYPE ...`), thrown by redis_reply::checked().
class redis_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct redis_reply {
  enum class kind { nil, integer, string, status, error, array };

  kind type = kind::nil;
  long long integer = 0;              // integer
  std::string text;                   // string (bulk), status ("OK") and error ("ERR ...")
  std::vector<redis_reply> elements;  // array

  bool is_nil() const { return type == kind::nil; }
  bool is_error() const { return type == kind::error; }
  // True for an error reply whose code (its first word) is `code`, e.g. "NOSCRIPT".
  bool is_error(std::string_view code) const;

  // The reply itself, or redis_error with the server's message when it is an error reply.
  const redis_reply& checked() const&;
  redis_reply checked() &&;
};

}  // namespace broker::gateway
