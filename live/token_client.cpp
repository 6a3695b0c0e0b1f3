// One HTTPS request at a time on a private io_context, run on the calling thread (a token
// refresher's, a mint's) until the answer is in or the deadline passes.
#include "live/token_client.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>

#include <memory>
#include <mutex>
#include <optional>

#include "base/secret.hpp"
#include "brokers/secret_source.hpp"
#include "certs/tls_contexts.hpp"
#include "http/parser.hpp"

namespace broker::live {
namespace {

namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
using tcp = asio::ip::tcp;

struct https_url {
  std::string host;
  std::uint16_t port = 443;
  std::string path;
};

https_url parse_url(const std::string& url) {
  constexpr std::string_view scheme = "https://";
  if (!url.starts_with(scheme)) throw brokers::source_error("provider " + url + ": not https");
  https_url out;
  std::string_view rest = std::string_view(url).substr(scheme.size());
  const std::size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  out.path = slash == std::string_view::npos ? "/" : std::string(rest.substr(slash));
  if (const std::size_t colon = authority.rfind(':'); colon != std::string_view::npos) {
    const std::string port(authority.substr(colon + 1));
    out.port = static_cast<std::uint16_t>(std::stoi(port));
    authority = authority.substr(0, colon);
  }
  out.host = std::string(authority);
  if (out.host.empty()) throw brokers::source_error("provider " + url + ": no host");
  return out;
}

// The exchange on one connection; `answer` gets the decoded body.
class provider_exchange {
 public:
  provider_exchange(asio::io_context& io, ssl::context& tls, std::string method,
                    std::string request)
      : resolver_(io),
        stream_(io, tls),
        request_(std::move(request)),
        parser_(http::parser::kind::response, std::move(method)) {}
  ~provider_exchange() { base::wipe(request_); }

  void start(const https_url& url, const std::string& dial_host, std::uint16_t dial_port) {
    if (!certs::tls_contexts::expect_peer(stream_.native_handle(), url.host, false))
      return fail("TLS setup failed");
    resolver_.async_resolve(
        dial_host, std::to_string(dial_port), [this](auto ec, tcp::resolver::results_type results) {
          if (ec) return fail("cannot resolve: " + ec.message());
          asio::async_connect(stream_.lowest_layer(), results,
                              [this](auto ec2, const auto&) { connected(ec2); });
        });
  }
  bool done() const { return done_; }
  const std::string& error() const { return error_; }
  std::string& answer() { return body_; }
  int status() const { return parser_.head().status; }
  std::vector<std::pair<std::string, std::string>> headers() const {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& h : parser_.head().headers) out.emplace_back(h.name, h.value);
    return out;
  }

 private:
  void connected(boost::system::error_code ec) {
    if (ec) return fail("cannot connect: " + ec.message());
    stream_.async_handshake(ssl::stream_base::client, [this](auto ec2) {
      if (ec2) return fail(certs::tls_failure(stream_.native_handle(), "TLS handshake failed"));
      asio::async_write(stream_, asio::buffer(request_), [this](auto ec3, std::size_t) {
        if (ec3) return fail("write failed: " + ec3.message());
        read();
      });
    });
  }
  void read() {
    stream_.async_read_some(asio::buffer(buffer_), [this](auto ec, std::size_t n) {
      if (ec) {
        // A read-until-close body ends here; anything else cut short is a failure.
        if (parser_.finish().status == http::parse_status::message_complete) return finished();
        return fail("the connection ended before the answer: " + ec.message());
      }
      // The head's end stops a feed: what came after it in the same read is fed again.
      std::string_view data(buffer_.data(), n);
      for (;;) {
        const auto r = parser_.feed(data, &body_);
        if (r.status == http::parse_status::error) return fail("malformed answer");
        if (r.status == http::parse_status::message_complete) return finished();
        if (r.status != http::parse_status::head_complete) break;
        data.remove_prefix(r.consumed);
      }
      read();
    });
  }
  void finished() { done_ = true; }
  void fail(std::string why) {
    error_ = std::move(why);
    done_ = true;
  }

  tcp::resolver resolver_;
  ssl::stream<tcp::socket> stream_;
  std::string request_;
  std::array<char, 16 * 1024> buffer_{};
  http::parser parser_;
  std::string body_;
  std::string error_;
  bool done_ = false;
};

}  // namespace

brokers::provider_transport make_provider_transport(std::vector<connect_to_rule> connect_to,
                                                    std::vector<std::filesystem::path> upstream_cas,
                                                    std::chrono::seconds timeout) {
  // The context and its trust store are made on the first refresh: the system roots are ~150
  // certificates to parse, a TLS context alone is ~0.5 ms of OpenSSL's algorithm fetching, and
  // most sessions never call a token endpoint (`broker wrap -- true` must not pay).
  struct lazy_context {
    std::once_flag loaded;
    std::optional<ssl::context> tls;
    std::vector<std::filesystem::path> upstream_cas;
    ssl::context& get() {
      std::call_once(loaded, [this] {
        tls.emplace(ssl::context::tls_client);
        tls->set_default_verify_paths();
        for (const auto& file : upstream_cas) tls->load_verify_file(file.string());
        tls->set_verify_mode(ssl::verify_peer);
      });
      return *tls;
    }
  };
  auto context = std::make_shared<lazy_context>();
  context->upstream_cas = std::move(upstream_cas);
  return [context, connect_to = std::move(connect_to),
          timeout](const brokers::provider_request& call) -> brokers::provider_answer {
    ssl::context& tls = context->get();
    const https_url target = parse_url(call.url);
    std::string dial_host = target.host;
    std::uint16_t dial_port = target.port;
    if (auto mapped = apply_connect_to(connect_to, target.host, target.port)) {
      dial_host = mapped->host;
      dial_port = mapped->port;
    }
    std::string request =
        call.method + " " + target.path + " HTTP/1.1\r\nHost: " + target.host + "\r\n";
    for (const auto& [name, value] : call.headers) request += name + ": " + value + "\r\n";
    request += "Content-Length: " + std::to_string(call.body.size()) +
               "\r\nConnection: close\r\n\r\n" + call.body;
    asio::io_context io;
    provider_exchange exchange(io, tls, call.method, std::move(request));
    exchange.start(target, dial_host, dial_port);
    io.run_for(timeout);
    if (!exchange.done())
      throw brokers::source_error(target.host + ": no answer within " +
                                  std::to_string(timeout.count()) + " s");
    if (!exchange.error().empty())
      throw brokers::source_error(target.host + ": " + exchange.error());
    return {exchange.status(), std::move(exchange.answer()), exchange.headers()};
  };
}

}  // namespace broker::live
