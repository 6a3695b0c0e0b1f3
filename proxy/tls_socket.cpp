#include "proxy/tls_socket.hpp"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <sys/socket.h>

#include <boost/asio/ssl/error.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace broker::proxy {

struct tls_socket::bio_state {
  int fd = -1;
  std::string early;  // read before the socket
  std::size_t early_used = 0;
  int failed_errno = 0;  // the last socket error other than EAGAIN
};

namespace {

using bio_state = tls_socket::bio_state;

int bio_read(BIO* bio, char* out, int size) {
  auto* s = static_cast<bio_state*>(BIO_get_data(bio));
  BIO_clear_retry_flags(bio);
  if (size <= 0) return 0;
  if (s->early_used < s->early.size()) {
    const std::size_t n = std::min(s->early.size() - s->early_used, static_cast<std::size_t>(size));
    std::memcpy(out, s->early.data() + s->early_used, n);
    s->early_used += n;
    if (s->early_used == s->early.size()) std::string().swap(s->early);
    return static_cast<int>(n);
  }
  for (;;) {
    const ssize_t n = ::recv(s->fd, out, static_cast<std::size_t>(size), MSG_DONTWAIT);
    if (n >= 0) return static_cast<int>(n);  // 0: the peer closed
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      BIO_set_retry_read(bio);
    } else {
      s->failed_errno = errno;
    }
    return -1;
  }
}

int bio_write(BIO* bio, const char* in, int size) {
  auto* s = static_cast<bio_state*>(BIO_get_data(bio));
  BIO_clear_retry_flags(bio);
  for (;;) {
    const ssize_t n =
        ::send(s->fd, in, static_cast<std::size_t>(size), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n >= 0) return static_cast<int>(n);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      BIO_set_retry_write(bio);
    } else {
      s->failed_errno = errno;
    }
    return -1;
  }
}

long bio_ctrl(BIO*, int cmd, long, void*) {
  // Writes go straight to the socket: nothing to flush. Everything else is unsupported.
  return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

int bio_create(BIO* bio) {
  BIO_set_init(bio, 1);
  return 1;
}

int bio_destroy(BIO*) {
  return 1;
}

BIO_METHOD* socket_method() {
  static BIO_METHOD* method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "broker socket");
    if (!m || BIO_meth_set_read(m, bio_read) != 1 || BIO_meth_set_write(m, bio_write) != 1 ||
        BIO_meth_set_ctrl(m, bio_ctrl) != 1 || BIO_meth_set_create(m, bio_create) != 1 ||
        BIO_meth_set_destroy(m, bio_destroy) != 1)
      throw std::bad_alloc();
    return m;
  }();
  return method;
}

// What an SSL_* failure means, in the codes asio's stream gives (callers compare with eof and
// stream_truncated, and log message()).
error_code failure_code(int ssl_error, const bio_state& s) {
  switch (ssl_error) {
    case SSL_ERROR_ZERO_RETURN:
      return asio::error::eof;
    case SSL_ERROR_SSL: {
      const unsigned long e = ERR_get_error();
      ERR_clear_error();
      if (ERR_GET_REASON(e) == SSL_R_UNEXPECTED_EOF_WHILE_READING)
        return asio::ssl::error::stream_truncated;
      return error_code(static_cast<int>(e), asio::error::get_ssl_category());
    }
    case SSL_ERROR_SYSCALL:
      ERR_clear_error();
      if (s.failed_errno != 0) return error_code(s.failed_errno, boost::system::system_category());
      return asio::ssl::error::stream_truncated;
    default:
      ERR_clear_error();
      return error_code(EPROTO, boost::system::system_category());
  }
}

}  // namespace

tls_socket::tls_socket(tcp::socket socket, SSL_CTX* ctx)
    : socket_(std::move(socket)),
      bio_(std::make_unique<bio_state>()),
      ssl_(SSL_new(ctx), &SSL_free) {
  if (!ssl_) throw std::bad_alloc();
  bio_->fd = socket_.native_handle();
  BIO* bio = BIO_new(socket_method());
  if (!bio) throw std::bad_alloc();
  BIO_set_data(bio, bio_.get());
  SSL_set_bio(ssl_.get(), bio, bio);
  // A write that would block is retried with the same bytes, possibly from a moved buffer.
  SSL_set_mode(ssl_.get(), SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
}

tls_socket::~tls_socket() = default;
tls_socket::tls_socket(tls_socket&&) noexcept = default;

template <typename Op>
int tls_socket::attempt(Op op, error_code& ec) {
  bio_->failed_errno = 0;
  // SSL_get_error needs an empty error queue; clearing one that is empty (nearly always: a
  // failure clears it below) costs more than looking.
  if (ERR_peek_error() != 0) ERR_clear_error();
  const int r = op();
  if (r > 0) {
    ec = {};
    return 0;
  }
  const int why = SSL_get_error(ssl_.get(), r);
  if (why == SSL_ERROR_WANT_READ || why == SSL_ERROR_WANT_WRITE) return why;
  ec = failure_code(why, *bio_);
  return 0;
}

template <typename Op>
asio::awaitable<error_code> tls_socket::drive(Op op, int wants) {
  for (;;) {
    // Our BIO said EAGAIN just now, so the edge-triggered reactor reports the next change.
    auto [waited] = co_await socket_.async_wait(
        wants == SSL_ERROR_WANT_READ ? tcp::socket::wait_read : tcp::socket::wait_write, use_tuple);
    if (waited) co_return waited;
    error_code ec;
    wants = attempt(op, ec);
    if (wants == 0) co_return ec;
  }
}

template <typename Op>
asio::awaitable<error_code> tls_socket::complete(Op op) {
  error_code ec;
  if (const int wants = attempt(op, ec); wants != 0) ec = co_await drive(op, wants);
  co_return ec;
}

asio::awaitable<error_code> tls_socket::handshake_server(std::string_view early) {
  bio_->early.assign(early);
  bio_->early_used = 0;
  SSL_set_accept_state(ssl_.get());
  co_return co_await complete([this] { return SSL_do_handshake(ssl_.get()); });
}

asio::awaitable<error_code> tls_socket::handshake_client() {
  SSL_set_connect_state(ssl_.get());
  co_return co_await complete([this] { return SSL_do_handshake(ssl_.get()); });
}

asio::awaitable<std::tuple<error_code, std::size_t>> tls_socket::read_some(std::span<char> into) {
  std::size_t n = 0;
  const auto op = [&] { return SSL_read_ex(ssl_.get(), into.data(), into.size(), &n); };
  // Tried here first: bytes already there (decrypted, or on the socket) need no waiting frame.
  error_code ec;
  if (const int wants = attempt(op, ec); wants != 0) ec = co_await drive(op, wants);
  co_return std::tuple{ec, ec ? std::size_t{0} : n};
}

asio::awaitable<std::tuple<error_code, std::size_t>> tls_socket::write(std::string_view data) {
  if (data.empty()) co_return std::tuple{error_code{}, std::size_t{0}};
  std::size_t n = 0;
  // Without SSL_MODE_ENABLE_PARTIAL_WRITE a success means every byte went out. Tried here first:
  // a write the socket takes at once (nearly all) needs no waiting frame.
  const auto op = [&] { return SSL_write_ex(ssl_.get(), data.data(), data.size(), &n); };
  error_code ec;
  if (const int wants = attempt(op, ec); wants != 0) ec = co_await drive(op, wants);
  co_return std::tuple{ec, ec ? std::size_t{0} : data.size()};
}

asio::awaitable<void> tls_socket::shutdown() {
  // 0: our close_notify is out, the peer's not yet in: call again to wait for it.
  (void)co_await complete([this] {
    const int r = SSL_shutdown(ssl_.get());
    return r == 0 ? SSL_shutdown(ssl_.get()) : r;
  });
}

}  // namespace broker::proxy
