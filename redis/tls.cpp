#include "redis/tls.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace delayd::redis {

namespace {

// OpenSSL's queued errors as one line (most recent last), and the queue emptied.
std::string openssl_errors() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? "unknown TLS error" : out;
}

bool is_ip_literal(const std::string& host) {
  in6_addr a6{};
  in_addr a4{};
  return ::inet_pton(AF_INET, host.c_str(), &a4) == 1 || ::inet_pton(AF_INET6, host.c_str(), &a6) == 1;
}

timeval to_timeval(std::chrono::milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

// A TCP connection to host:port within timeout, blocking afterwards with timeout on every read
// and write. Returns the socket, or -1 with `why` set.
int connect_tcp(const std::string& host, int port, std::chrono::milliseconds timeout, std::string& why) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0) {
    why = std::string("cannot resolve the host: ") + ::gai_strerror(rc);
    return -1;
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> list(found, &::freeaddrinfo);
  why = "cannot connect";
  for (const addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    if (fd < 0) continue;
    int rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      rc = ::poll(&p, 1, static_cast<int>(timeout.count()));
      if (rc == 0) {
        why = "cannot connect: timed out";
        ::close(fd);
        continue;
      }
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      rc = err == 0 ? 0 : -1;
      errno = err;
    }
    if (rc != 0) {
      why = std::string("cannot connect: ") + std::strerror(errno);
      ::close(fd);
      continue;
    }
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    const timeval tv = to_timeval(timeout);
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    return fd;
  }
  return -1;
}

}  // namespace

void TlsContext::Free::operator()(SSL_CTX* c) const { SSL_CTX_free(c); }

TlsContext::TlsContext(const TlsOptions& options) : options_(options), ctx_(SSL_CTX_new(TLS_client_method())) {
  if (!ctx_) throw TlsSetupError("ca_file", "cannot create a TLS context: " + openssl_errors());
  SSL_CTX_set_min_proto_version(ctx_.get(), TLS1_2_VERSION);
  if (!options_.ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(ctx_.get(), options_.ca_file.c_str(), nullptr) != 1) {
      throw TlsSetupError("ca_file", "cannot read the CA file " + options_.ca_file + ": " + openssl_errors());
    }
  } else if (SSL_CTX_set_default_verify_paths(ctx_.get()) != 1) {
    throw TlsSetupError("ca_file", "cannot load the system's CA certificates: " + openssl_errors());
  }
  if (options_.cert_file.empty() != options_.key_file.empty()) {
    throw TlsSetupError(options_.cert_file.empty() ? "cert_file" : "key_file",
                        "a client certificate needs both its certificate file and its key file");
  }
  if (!options_.cert_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(ctx_.get(), options_.cert_file.c_str()) != 1) {
      throw TlsSetupError("cert_file",
                          "cannot read the certificate file " + options_.cert_file + ": " + openssl_errors());
    }
    if (SSL_CTX_use_PrivateKey_file(ctx_.get(), options_.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
      throw TlsSetupError("key_file", "cannot use the key file " + options_.key_file + " with the certificate file " +
                                          options_.cert_file + ": " + openssl_errors());
    }
    if (SSL_CTX_check_private_key(ctx_.get()) != 1) {
      throw TlsSetupError("key_file", "the key file " + options_.key_file + " does not match the certificate file " +
                                          options_.cert_file);
    }
  }
  SSL_CTX_set_verify(ctx_.get(), options_.verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nullptr);
  SSL_CTX_set_mode(ctx_.get(), SSL_MODE_AUTO_RETRY);
}

TlsStream::TlsStream(const TlsContext& context, const std::string& host, int port, std::chrono::milliseconds timeout)
    : where_("redis " + host + ":" + std::to_string(port)) {
  ERR_clear_error();
  std::string why;
  fd_ = connect_tcp(host, port, timeout, why);
  if (fd_ < 0) throw RedisIoError(where_ + ": " + why);
  ssl_ = SSL_new(context.get());
  if (ssl_ == nullptr) fail("cannot start a TLS session: " + openssl_errors());
  const TlsOptions& o = context.options();
  const std::string& name = o.server_name.empty() ? host : o.server_name;
  if (is_ip_literal(name)) {
    if (o.verify && X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_), name.c_str()) != 1) {
      fail("cannot verify against " + name + ": " + openssl_errors());
    }
  } else {
    SSL_set_tlsext_host_name(ssl_, name.c_str());  // SNI: only names, never addresses
    if (o.verify && SSL_set1_host(ssl_, name.c_str()) != 1) {
      fail("cannot verify against " + name + ": " + openssl_errors());
    }
  }
  SSL_set_fd(ssl_, fd_);
  if (SSL_connect(ssl_) != 1) {
    const long verdict = SSL_get_verify_result(ssl_);
    if (verdict != X509_V_OK) {
      ERR_clear_error();
      fail(std::string("TLS handshake refused the server's certificate: ") + X509_verify_cert_error_string(verdict) +
           " (verified as " + name + ")");
    }
    const int saved = errno;
    const std::string queued = ERR_peek_error() != 0 ? openssl_errors() : "";
    if (!queued.empty()) fail("TLS handshake failed: " + queued);
    fail(std::string("TLS handshake failed: ") + (saved == EAGAIN || saved == EWOULDBLOCK ? "timed out"
                                                  : saved != 0
                                                      ? std::strerror(saved)
                                                      : "the server closed the connection (is it a TLS port?)"));
  }
}

TlsStream::~TlsStream() {
  if (ssl_ != nullptr) SSL_free(ssl_);
  if (fd_ >= 0) ::close(fd_);
}

// The session is unusable after any failure: its resources go now (a constructor that throws
// runs no destructor), and the caller drops the stream.
void TlsStream::fail(const std::string& what) {
  if (ssl_ != nullptr) SSL_free(ssl_);
  ssl_ = nullptr;
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  throw RedisIoError(where_ + ": " + what);
}

void TlsStream::write_all(std::string_view bytes) {
  if (ssl_ == nullptr) fail("connection lost");
  while (!bytes.empty()) {
    ERR_clear_error();
    errno = 0;
    const int n = SSL_write(ssl_, bytes.data(), static_cast<int>(bytes.size()));
    if (n <= 0) {
      const int saved = errno;
      const int code = SSL_get_error(ssl_, n);
      if (code == SSL_ERROR_SSL) fail("connection lost: " + openssl_errors());
      fail(std::string("connection lost: ") +
           (saved == EAGAIN || saved == EWOULDBLOCK ? "write timed out" : std::strerror(saved)));
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
}

std::size_t TlsStream::read_some(char* buf, std::size_t size) {
  if (ssl_ == nullptr) fail("connection lost");
  ERR_clear_error();
  errno = 0;
  const int n = SSL_read(ssl_, buf, static_cast<int>(size));
  if (n > 0) return static_cast<std::size_t>(n);
  const int saved = errno;
  const int code = SSL_get_error(ssl_, n);
  if (code == SSL_ERROR_ZERO_RETURN || (code == SSL_ERROR_SYSCALL && saved == 0)) {
    fail("connection lost: the server closed it");
  }
  if (code == SSL_ERROR_SSL) fail("connection lost: " + openssl_errors());
  fail(std::string("connection lost: ") +
       (saved == EAGAIN || saved == EWOULDBLOCK ? "read timed out" : std::strerror(saved)));
}

}  // namespace delayd::redis
