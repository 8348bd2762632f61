// RedisConnection over TLS against real redis-server processes that each test starts itself
// (TLS only: --port 0 --tls-port), with certificates made by scripts/tls-certs.sh: the good
// path (verification, client certificates, pipelines bigger than a TLS record, a reconnect after
// the server restarts), and each way it must refuse, with the reason in the error: another CA, an
// expired certificate, a name that does not match, a missing client certificate, a server that
// does not speak TLS, a server that never answers the handshake, and files that cannot be used.
#include "redis/tls.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "redis/connection.hpp"
#include "redis/url.hpp"
#include "support/tls_redis.hpp"

using namespace delayd::redis;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

using delayd::testing::cert;
using delayd::testing::TlsRedis;

// The stack's client settings for a server on `port`: the CA, the client certificate and key.
RedisOptions client(int port) {
  RedisOptions o = parse_redis_url("rediss://127.0.0.1:" + std::to_string(port));
  o.tls.ca_file = cert("ca.crt");
  o.tls.cert_file = cert("client.crt");
  o.tls.key_file = cert("client.key");
  o.timeout_ms = 2000;
  return o;
}

// The message RedisConnection's constructor throws with `o`; "" when it connects.
std::string refusal(const RedisOptions& o) {
  try {
    RedisConnection c(o);
    RedisReply r = c.command({"PING"});
    return "";
  } catch (const RedisIoError& e) {
    return e.what();
  }
}

}  // namespace

TEST_CASE(
    "tls: a rediss:// connection verifies the server, presents its certificate, and carries pipelines of any size",
    "[tls]") {
  ::signal(SIGPIPE, SIG_IGN);
  TlsRedis server;
  RedisConnection c(client(server.port()));
  CHECK(c.command({"PING"}).view().str() == "PONG");

  // A value much bigger than a TLS record (16 KiB), and a pipeline whose replies arrive in many reads.
  const std::string big(300 * 1024, 'x');
  REQUIRE(c.command({"SET", "big", big}).view().str() == "OK");
  CHECK(c.command({"GET", "big"}).view().str() == big);
  std::vector<Command> batch;
  for (int i = 0; i < 2000; ++i) batch.push_back({"SET", "k" + std::to_string(i), std::string(100, 'a' + i % 26)});
  for (int i = 0; i < 2000; ++i) batch.push_back({"GET", "k" + std::to_string(i)});
  const auto replies = c.pipeline(batch);
  REQUIRE(replies.size() == 4000);
  for (int i = 0; i < 2000; ++i) {
    CHECK(replies[static_cast<std::size_t>(2000 + i)].view().str() == std::string(100, 'a' + i % 26));
  }
  // An error reply is a reply over TLS too.
  CHECK(c.command({"INCR", "big"}).view().is_error());

  // Two posts outstanding: the second one's replies may arrive with the first one's reads, and
  // wait in the reader for its collect().
  c.post(std::vector<Command>(batch.begin() + 2000, batch.end()));
  c.post({{"GET", "k1"}, {"PING"}});
  const auto first = c.collect();
  REQUIRE(first.size() == 2000);
  CHECK(first[1999].view().str() == std::string(100, 'a' + 1999 % 26));
  const auto second = c.collect();
  REQUIRE(second.size() == 2);
  CHECK(second[0].view().str() == std::string(100, 'b'));
  CHECK(second[1].view().str() == "PONG");

  // The name to verify may be given: localhost is in the certificate.
  RedisOptions named = client(server.port());
  named.tls.server_name = "localhost";
  CHECK(refusal(named).empty());
}

TEST_CASE("tls: a restarted server breaks the session once, and the next call reconnects", "[tls]") {
  ::signal(SIGPIPE, SIG_IGN);
  TlsRedis server;
  RedisConnection c(client(server.port()));
  REQUIRE(c.command({"SET", "a", "1"}).view().str() == "OK");
  server.stop();
  CHECK_THROWS_AS(c.command({"GET", "a"}), RedisIoError);
  CHECK_FALSE(c.connected());
  server.start();
  CHECK(c.command({"PING"}).view().str() == "PONG");
  CHECK(c.connected());
}

TEST_CASE("tls: another CA, an expired certificate and a name mismatch are refused with the reason", "[tls]") {
  ::signal(SIGPIPE, SIG_IGN);
  {
    TlsRedis server;
    RedisOptions o = client(server.port());
    o.tls.ca_file = cert("other-ca.crt");
    const std::string why = refusal(o);
    // The server sends its chain up to its own CA, which the client's CA file does not hold.
    CHECK_THAT(why, Catch::Contains("self-signed certificate in certificate chain"));
    CHECK_THAT(why, Catch::Contains("127.0.0.1:" + std::to_string(server.port())));
    // Verification off (testing only) accepts it.
    o.tls.verify = false;
    CHECK(refusal(o).empty());
  }
  {
    TlsRedis server("expired");
    CHECK_THAT(refusal(client(server.port())), Catch::Contains("certificate has expired"));
  }
  {
    TlsRedis server("wrongname");
    CHECK_THAT(refusal(client(server.port())), Catch::Contains("IP address mismatch"));
    RedisOptions o = client(server.port());
    o.tls.server_name = "localhost";
    CHECK_THAT(refusal(o), Catch::Contains("hostname mismatch") && Catch::Contains("verified as localhost"));
    o.tls.server_name = "elsewhere.invalid";  // the name it does carry
    CHECK(refusal(o).empty());
  }
}

TEST_CASE(
    "tls: never in clear: a TLS client and a plain server, a plain client and a TLS server, no client certificate",
    "[tls]") {
  ::signal(SIGPIPE, SIG_IGN);
  TlsRedis server;
  // A plain redis:// client to the TLS port gets no reply it can parse: an error, never data.
  RedisOptions plain = parse_redis_url("redis://127.0.0.1:" + std::to_string(server.port()));
  plain.timeout_ms = 1000;
  CHECK_THROWS_AS(RedisConnection(plain).command({"PING"}), RedisIoError);

  // The server requires a client certificate: without one the session is refused.
  RedisOptions anonymous = client(server.port());
  anonymous.tls.cert_file.clear();
  anonymous.tls.key_file.clear();
  CHECK_FALSE(refusal(anonymous).empty());

  // A rediss:// client to a port that never answers the handshake: timed out, within its timeout.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(::listen(fd, 4) == 0);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  RedisOptions silent = client(ntohs(a.sin_port));
  silent.timeout_ms = 300;
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_THAT(refusal(silent), Catch::Contains("timed out"));
  CHECK(std::chrono::steady_clock::now() - t0 < 3s);
  ::close(fd);
}

TEST_CASE("tls: files that cannot be used are named when the context is built", "[tls]") {
  TlsOptions o;
  o.enabled = true;
  o.ca_file = "/nonexistent/ca.crt";
  try {
    TlsContext c(o);
    FAIL("a missing CA file was accepted");
  } catch (const TlsSetupError& e) {
    CHECK(e.setting == "ca_file");
    CHECK_THAT(std::string(e.what()), Catch::Contains("/nonexistent/ca.crt"));
  }
  o.ca_file = cert("ca.crt");
  o.cert_file = cert("client.crt");
  o.key_file = cert("server.key");  // another certificate's key
  try {
    TlsContext c(o);
    FAIL("a key of another certificate was accepted");
  } catch (const TlsSetupError& e) {
    CHECK(e.setting == "key_file");
    CHECK_THAT(std::string(e.what()), Catch::Contains("server.key") && Catch::Contains("key values mismatch"));
  }
  o.key_file.clear();
  CHECK_THROWS_AS(TlsContext(o), TlsSetupError);
  o.key_file = cert("client.key");
  CHECK_NOTHROW(TlsContext(o));
}

TEST_CASE("tls: rediss:// and redis-cluster+tls:// ask for TLS, redis:// and redis-cluster:// do not", "[tls]") {
  CHECK(parse_redis_url("rediss://h:1").tls.enabled);
  CHECK(parse_redis_url("rediss://:pw@h:1/2").db == 2);
  CHECK_FALSE(parse_redis_url("redis://h:1").tls.enabled);
  const RedisTarget t = parse_redis_target("redis-cluster+tls://a:1,b:2");
  CHECK(t.is_cluster());
  CHECK(t.options.tls.enabled);
  CHECK_FALSE(parse_redis_target("redis-cluster://a:1").options.tls.enabled);
  CHECK_THROWS_WITH(parse_redis_url("redis+tls://h"), Catch::Contains("rediss://"));
  CHECK(mask_redis_url("rediss://u:secret@h:1") == "rediss://u:***@h:1");
}
