// delayd against a Redis that speaks TLS only (a redis-server this test starts itself, see
// tests/support/tls_redis.hpp) whose certificate delayd cannot trust when it starts: expired,
// then for another name. Each is one clear log line with OpenSSL's reason and /healthz naming it;
// delayd keeps running and retrying (never a crash, never a plaintext fallback), and once the
// server shows a good certificate every job goes out, none early. Kafka is the stack's.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include "harness.hpp"
#include "support/tls_redis.hpp"

using namespace delayd::e2e;
using delayd::testing::cert;
using delayd::testing::TlsRedis;

namespace {

// Lines of the log that contain `text` (and `also`, when given).
int lines_with(const std::string& log, const std::string& text, const std::string& also = "") {
  int n = 0;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    n += line.find(text) != std::string::npos && line.find(also) != std::string::npos ? 1 : 0;
  }
  return n;
}

}  // namespace

TEST_CASE("over TLS, a server certificate delayd cannot trust is one clear line and a wait, then every job goes out",
          "[e2e][tls]") {
  TlsRedis server("expired");
  // delayd and this test's Redis reads (JobReader) take the same variables.
  ::setenv("DELAYD_REDIS_TLS_CA_FILE", cert("ca.crt").c_str(), 1);
  ::setenv("DELAYD_REDIS_TLS_CERT_FILE", cert("client.crt").c_str(), 1);
  ::setenv("DELAYD_REDIS_TLS_KEY_FILE", cert("client.key").c_str(), 1);
  World w("tls-faults");
  w.redis_url = "rediss://127.0.0.1:" + std::to_string(server.port());
  const std::uint16_t admin = free_port();
  w.settings["DELAYD_ADMIN_LISTEN"] = "127.0.0.1:" + std::to_string(admin);
  w.create_topics({"tls"});
  Publisher pub(w);
  Collector ready(w, {w.ready_topic("tls")});
  REQUIRE(ready.wait_assigned());

  struct Fault {
    std::string certificate;  // what the server presents while delayd starts
    std::string reason;       // what delayd's line must say
  };
  const Fault faults[] = {{"expired", "certificate has expired"}, {"wrongname", "IP address mismatch"}};
  std::map<std::string, std::int64_t> due;
  int outages = 0;
  for (const Fault& f : faults) {
    INFO("server certificate: " << f.certificate);
    if (f.certificate != "expired") {  // the first server starts with it
      server.stop();
      server.start(f.certificate);
    }
    DelaydProcess delayd(w);
    delayd.set_die_with_test(true);
    delayd.start_until("redis unavailable: ");
    ++outages;
    // A job for the time of the outage: published now, accepted once Redis is back.
    const std::string id = "tls-" + f.certificate;
    due[id] = now_ms() + 2000;
    pub.send(job_at(id, due[id], "v-" + id, id, "tls"));
    pub.flush();
    // Past the job's due time, still in the outage: one line naming the reason, /healthz
    // naming it too, and delayd still runs.
    while (now_ms() < due[id] + 1000) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const std::string log = log_text(w);
    CHECK(lines_with(log, "redis unavailable: ") == outages);
    CHECK(lines_with(log, "redis unavailable: ", f.reason) == 1);
    CHECK_THAT(http_get(admin, "/healthz"), Catch::Contains("503") && Catch::Contains(f.reason));
    CHECK_THAT(http_get(admin, "/readyz"),
               Catch::Contains("not ready: starting up (redis unavailable: ") && Catch::Contains(f.reason));
    CHECK(delayd.running());

    server.stop();
    server.start("server");
    REQUIRE(ready.collect_until([&](const auto& recs) { return recs.size() >= due.size(); }, std::chrono::seconds(30)));
    CHECK(delayd.stop() == 0);
  }
  for (const auto& r : ready.records()) {
    const std::string id = header(r, "job-id").value_or("");
    REQUIRE(due.count(id) == 1);
    CHECK(r.timestamp_ms >= due[id]);
  }
  CHECK(ready.records().size() == due.size());
  JobReader reader(w);
  for (const auto& [id, at] : due) CHECK(reader.field(id, "state") == std::optional<std::string>("ready"));
  const std::string log = log_text(w);
  std::cout << "tls faults: " << outages << " outages at start-up, " << lines_with(log, "redis unavailable: ")
            << " lines (" << lines_with(log, "redis unavailable: ", "certificate has expired")
            << " certificate has expired, " << lines_with(log, "redis unavailable: ", "IP address mismatch")
            << " IP address mismatch), " << ready.records().size() << " of " << due.size()
            << " jobs delivered, none early\n";
}
