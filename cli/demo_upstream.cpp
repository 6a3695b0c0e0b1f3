#include "cli/demo_upstream.hpp"

#include "base/loopback_socket.hpp"
#include "base/text.hpp"
#include "cli/common.hpp"
#include "http/message.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cctype>
#include <stdexcept>
#include <string_view>

#include <openssl/crypto.h>
#include <openssl/rand.h>

namespace broker::cli {

namespace {

// A demo request is one small head; anything larger is not what curl sends here.
constexpr std::size_t max_head_bytes = 16 * 1024;
// No read or write on an accepted connection waits longer than this.
constexpr int io_timeout_seconds = 5;
// How often the accept loop looks at the stop flag.
constexpr int accept_poll_ms = 100;

std::string response(int status, const char* reason, const std::string& body) {
  return "HTTP/1.1 " + std::to_string(status) + " " + reason +
         "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n\r\n" + body;
}

base::secret random_github_token() {
  static constexpr char alphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::string token = "ghp_";
  while (token.size() < 40) {
    unsigned char byte = 0;
    if (RAND_bytes(&byte, 1) != 1) throw std::runtime_error("RAND_bytes failed");
    if (byte < 248) token += alphabet[byte % 62];  // 248 = 4 * 62: no modulo bias
  }
  return base::secret(std::move(token));
}

}  // namespace

demo_upstream::demo_upstream(const std::string& host)
    : ca_(certs::certificate_authority::generate("broker demo upstream CA", 2)),
      leaves_(ca_, 1),
      real_token_(random_github_token()),
      tls_(SSL_CTX_new(TLS_server_method())) {
  const auto leaf = leaves_.get(host);
  if (!tls_ || SSL_CTX_set_min_proto_version(tls_.get(), TLS1_2_VERSION) != 1 ||
      SSL_CTX_use_certificate(tls_.get(), leaf.get()) != 1 ||
      SSL_CTX_use_PrivateKey(tls_.get(), leaves_.key()) != 1)
    throw std::runtime_error("demo upstream: cannot set up TLS");
  listener_ = base::loopback_listener(port_);
  thread_ = std::thread([this] { serve(); });
}

demo_upstream::~demo_upstream() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
  if (listener_ >= 0) ::close(listener_);
}

void demo_upstream::serve() {
  while (!stopping_) {
    pollfd p{listener_, POLLIN, 0};
    if (::poll(&p, 1, accept_poll_ms) <= 0) continue;
    const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    const timeval timeout{io_timeout_seconds, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
    answer(fd);
    ::close(fd);
  }
}

// One request per connection: read the head, answer, close. The broker does not pool a
// connection that says `Connection: close`, so each request arrives on a fresh one.
void demo_upstream::answer(int fd) {
  SSL* ssl = SSL_new(tls_.get());
  if (ssl == nullptr) return;
  SSL_set_fd(ssl, fd);
  std::string head;
  if (SSL_accept(ssl) == 1) {
    char buf[4096];
    while (head.find("\r\n\r\n") == std::string::npos && head.size() < max_head_bytes) {
      const int n = SSL_read(ssl, buf, sizeof buf);
      if (n <= 0) break;
      head.append(buf, static_cast<std::size_t>(n));
    }
  }
  if (head.find("\r\n\r\n") != std::string::npos) {
    const auto line_end = head.find("\r\n");
    const std::string_view request_line(head.data(), line_end);
    std::string out;
    if (request_line.starts_with("GET /user ")) {
      if (carries_real_token(head)) {
        ++answered_real_;
        out = response(200, "OK",
                       R"({"login":"octocat","note":"the upstream received the real token"})"
                       "\n");
      } else {
        out = response(401, "Unauthorized",
                       R"({"message":"Bad credentials","note":"no real token arrived"})"
                       "\n");
      }
    } else {
      out = response(404, "Not Found", "{\"message\":\"Not Found\"}\n");
    }
    SSL_write(ssl, out.data(), static_cast<int>(out.size()));
    SSL_shutdown(ssl);
  }
  base::wipe(head);
  SSL_free(ssl);
}

// `Authorization: token REAL` or `Authorization: Bearer REAL` (scheme case-insensitive).
bool demo_upstream::carries_real_token(const std::string& head) const {
  const std::string_view real = real_token_.expose();
  std::string_view rest(head);
  for (auto eol = rest.find("\r\n"); eol != std::string_view::npos; eol = rest.find("\r\n")) {
    const std::string_view line = rest.substr(0, eol);
    rest.remove_prefix(eol + 2);
    const auto colon = line.find(':');
    if (colon == std::string_view::npos || !http::iequals(line.substr(0, colon), "authorization"))
      continue;
    const std::string_view value = base::trim(line.substr(colon + 1));
    const auto space = value.find(' ');
    if (space == std::string_view::npos) continue;
    const std::string_view scheme = value.substr(0, space);
    const std::string_view token = base::trim(value.substr(space + 1));
    if ((http::iequals(scheme, "token") || http::iequals(scheme, "bearer")) &&
        token.size() == real.size() && CRYPTO_memcmp(token.data(), real.data(), real.size()) == 0)
      return true;
  }
  return false;
}

}  // namespace broker::cli
