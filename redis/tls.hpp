// TLS under a Redis connection.
//
// Debian 12's hiredis (0.14) has no TLS, and managed Redis often accepts nothing else. So for a
// rediss:// server delayd opens the TCP socket itself, runs an OpenSSL session on it (TlsStream),
// and keeps hiredis for what it does on any bytes: encoding commands (redisFormatCommandArgv) and
// parsing replies (redisReader). RedisConnection picks the plain hiredis context or this stream
// from RedisOptions::tls.enabled; everything above it (timeouts, reconnects, the error model, the
// cluster router) is the same for both.
//
// What is checked, and how a failure is named:
//   - The configuration (TlsContext): the CA file, the client certificate and its key are read
//     when the context is built; a missing or unreadable file, a key that does not match its
//     certificate, or a CA file without a certificate throws TlsSetupError naming the file and
//     OpenSSL's reason. delayd builds a context while validating its configuration, so these are
//     start-up errors (exit 2).
//   - The server (TlsStream): with verify on (the default), the chain must lead to the CA file's
//     certificates (or the system's when no CA file is given), be in its validity period, and
//     name the verification name (tls.server_name, else the host; an IP address is matched
//     against the certificate's IP entries). A refusal throws RedisIoError whose text carries
//     OpenSSL's verification reason ("certificate has expired", "hostname mismatch", "unable to
//     get local issuer certificate"): transient for the caller, retried with backoff, never a
//     silent plaintext fallback, since a rediss:// connection never sends a byte in clear.
//
// Time limits: the connect and the handshake each get timeout; every read and write after them
// gets timeout too (SO_RCVTIMEO / SO_SNDTIMEO), as hiredis's own timeout does on plain TCP.
// A write to a socket the server closed raises SIGPIPE, as with hiredis: delayd and delayctl
// ignore SIGPIPE process-wide so that it becomes an error return (RedisIoError).
// Threading: a TlsContext may be shared read-only once built; a TlsStream belongs to one thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include "redis/connection.hpp"

using SSL_CTX = struct ssl_ctx_st;
using SSL = struct ssl_st;

namespace delayd::redis {

// A TLS setting that cannot be used (a file missing or unreadable, a key that does not match).
// setting names the TlsOptions field at fault: "ca_file", "cert_file" or "key_file".
struct TlsSetupError : std::invalid_argument {
  TlsSetupError(std::string_view field, const std::string& what) : std::invalid_argument(what), setting(field) {}
  std::string_view setting;
};

// The client side of TLS for one set of TlsOptions: protocol floor TLS 1.2, the CA, the client
// certificate and key, and the verification mode.
class TlsContext {
 public:
  // Reads every file now. Precondition: options.enabled. Throws TlsSetupError naming the
  // setting's file and the reason.
  explicit TlsContext(const TlsOptions& options);
  SSL_CTX* get() const { return ctx_.get(); }
  const TlsOptions& options() const { return options_; }

 private:
  struct Free {
    void operator()(SSL_CTX* c) const;
  };
  TlsOptions options_;
  std::unique_ptr<SSL_CTX, Free> ctx_;
};

// One TLS session over a TCP connection to host:port, verified as TlsContext says.
class TlsStream {
 public:
  // Connects, handshakes and verifies within timeout each. Throws RedisIoError naming the
  // address and the reason (unreachable, timed out, the verification error).
  TlsStream(const TlsContext& context, const std::string& host, int port, std::chrono::milliseconds timeout);
  ~TlsStream();
  TlsStream(const TlsStream&) = delete;
  TlsStream& operator=(const TlsStream&) = delete;

  // Every byte written, or RedisIoError.
  void write_all(std::string_view bytes);
  // At least one byte read into buf (returns how many), or RedisIoError (closed, timed out).
  std::size_t read_some(char* buf, std::size_t size);

 private:
  [[noreturn]] void fail(const std::string& what);
  std::string where_;
  int fd_ = -1;
  SSL* ssl_ = nullptr;
};

}  // namespace delayd::redis
