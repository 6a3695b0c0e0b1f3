// A request body read whole before anything of the request goes upstream, when its credential
// plan asks for it (request_plan::whole_body): searched like a streamed one, bounded by the
// plan's limit and by the process-wide allowance for bodies held (held_bytes).
#pragma once

#include <optional>
#include <string>

#include "base/asio.hpp"
#include "live/refusal.hpp"
#include "proxy/http_exchange.hpp"

namespace broker::proxy {

class whole_body_reader {
 public:
  // Reads into the exchange's state (exchange_state::body).
  explicit whole_body_reader(http_exchange& ex);

  // Reads the whole request body (scanned like a streamed one), as the plan asks (at most
  // need.limit decoded bytes). Returns the refusal when it cannot.
  asio::awaitable<std::optional<live::refusal>> read(http::message_head& head,
                                                     const brokers::request_context& where,
                                                     const brokers::whole_body_need& need);

 private:
  struct body_reading;
  // Its pieces into the body, the allowance taken as it grows.
  asio::awaitable<std::optional<live::refusal>> read_body_into(body_reading& r);
  static std::string whole_body_too_large(const body_reading& r);
  // A search's stop as the refusal (a value's credential named in the record).
  live::refusal stopped(const body_reading& r, const search_stop& stop);

  exchange_state& s_;
};

}  // namespace broker::proxy
