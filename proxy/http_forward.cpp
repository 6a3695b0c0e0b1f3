// An absolute-form http:// request (RFC 9112 §3.2.2): its URI read into the destination it
// names, checked against its Host, and handed to its exchange (http_exchange.cpp).
#include "config/request_target.hpp"
#include "proxy/client_connection.hpp"

namespace broker::proxy {

asio::awaitable<next_step> client_connection::handle_forward(http::parser& request) {
  const http::message_head& head = request.head();
  auto& ex = begin_exchange(head.method);
  auto& entry = ex.entry();
  entry.target = head.target;
  // A refused request's body is not read, so the connection can only go on without one.
  const bool keep_after_refusal = request.keep_alive() && !head.has_body && !draining_;

  auto uri = config::parse_absolute_uri(head.target);
  if (!uri) {
    const bool origin_form = !head.target.empty() && head.target.front() == '/';
    entry.target.clear();
    co_return co_await ex.refuse(
        live::refusal::bad_request(origin_form ? "this is a proxy: send an absolute-form URI "
                                                 "(http://host/path) or use CONNECT"
                                               : "malformed request target"),
        keep_after_refusal);
  }
  entry.scheme = uri->scheme;
  entry.host = uri->where.dest.host;
  entry.port = uri->where.dest.port;
  entry.target = uri->path_and_query;
  if (uri->scheme != "http")
    co_return co_await ex.refuse(
        live::refusal::bad_request(
            "only http:// URIs are forwarded; https:// goes through CONNECT"),
        keep_after_refusal);
  const std::string* host_header = head.find("host");
  if (host_header && !config::host_header_matches(*host_header, uri->where, 80))
    co_return co_await ex.refuse(
        live::refusal::host_mismatch("the Host header does not match the request URI's authority"),
        keep_after_refusal);
  // Named, not a temporary in the co_await: GCC 12 destroys such temporaries twice.
  const request_target to{uri->where.dest, "http", uri->path_and_query, keep_after_refusal};
  co_return co_await ex.forward(request.head(), to);
}

}  // namespace broker::proxy
