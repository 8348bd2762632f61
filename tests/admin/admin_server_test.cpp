// The admin endpoint over real loopback sockets, on a port the kernel picks: endpoints,
// keep-alive, and the defences (header and body limits, the read deadline, the connection cap)
// against idle and oversized clients. The tokens and the audit log: admin_access_test.cpp.
#include "admin_server_harness.hpp"

using namespace delayd::admin::test;

TEST_CASE("healthz is 503 until the loop publishes, then ok, then degraded during an outage", "[admin]") {
  Running r;
  CHECK_THAT(request(r.port(), "GET /healthz HTTP/1.0\r\n\r\n"), Catch::StartsWith("HTTP/1.0 503"));
  r.server.publish({});
  const std::string ok = request(r.port(), "GET /healthz HTTP/1.0\r\n\r\n");
  CHECK_THAT(ok, Catch::StartsWith("HTTP/1.0 200"));
  CHECK(body(ok) == "ok\n");
  AdminSnapshot s;
  s.problem = "redis unavailable: connection refused";
  r.server.publish(s);
  CHECK(body(get(r.port(), "/healthz")) == "degraded: redis unavailable: connection refused\n");
  AdminSnapshot skewed;
  skewed.clock_problem = "this host's clock is 2.31 s ahead of Redis's (TIME)";
  r.server.publish(skewed);
  CHECK(body(get(r.port(), "/healthz")) == "degraded: this host's clock is 2.31 s ahead of Redis's (TIME)\n");
  skewed.problem = "redis unavailable: connection refused";
  r.server.publish(skewed);
  CHECK(body(get(r.port(), "/healthz")) ==
        "degraded: redis unavailable: connection refused; this host's clock is 2.31 s ahead of Redis's (TIME)\n");
  AdminSnapshot evicting;
  evicting.redis_settings_problem = "redis redis://r:6379 may drop any key once it holds its maxmemory (64 MiB)";
  r.server.publish(evicting);
  const std::string said = get(r.port(), "/healthz");
  CHECK_THAT(said, Catch::StartsWith("HTTP/1.1 200"));
  CHECK(body(said) == "degraded: redis redis://r:6379 may drop any key once it holds its maxmemory (64 MiB)\n");
  CHECK_THAT(get(r.port(), "/readyz"), Catch::StartsWith("HTTP/1.1 200"));
}

TEST_CASE(
    "readyz is 503 while starting, during an outage, while joining its groups and while shards load, with the reason, "
    "200 otherwise",
    "[admin]") {
  Running r;
  CHECK_THAT(get(r.port(), "/readyz"), Catch::StartsWith("HTTP/1.1 503") && Catch::EndsWith("starting up\n"));
  r.server.publish(sample_snapshot());
  const std::string ready = get(r.port(), "/readyz");
  CHECK_THAT(ready, Catch::StartsWith("HTTP/1.1 200"));
  CHECK(body(ready) == "ready\n");
  AdminSnapshot s = sample_snapshot();
  s.outages["redis"] = true;
  s.problem = "redis unavailable: connection refused";
  r.server.publish(s);
  const std::string down = get(r.port(), "/readyz");
  CHECK_THAT(down, Catch::StartsWith("HTTP/1.1 503"));
  CHECK(body(down) == "not ready: outage of redis (redis unavailable: connection refused)\n");
  AdminSnapshot loading = sample_snapshot();
  loading.loading = {"delay-ingest:2", "delay-ingest:3"};
  r.server.publish(loading);
  const std::string not_loaded = get(r.port(), "/readyz");
  CHECK_THAT(not_loaded, Catch::StartsWith("HTTP/1.1 503"));
  CHECK(body(not_loaded) == "not ready: loading 2 assigned shards (delay-ingest:2, delay-ingest:3)\n");
  AdminSnapshot joining = loading;
  joining.joining = {"delayd"};
  r.server.publish(joining);
  CHECK(body(get(r.port(), "/readyz")) == "not ready: joining consumer group delayd\n");
  joining.joining = {"delayd", "delayd.status"};
  r.server.publish(joining);
  CHECK(body(get(r.port(), "/readyz")) == "not ready: joining consumer groups delayd, delayd.status\n");
  CHECK(body(get(r.port(), "/healthz")) == "ok\n");  // a join is no outage until its bound
}

TEST_CASE("livez answers as healthz does, without the token", "[admin]") {
  Running r(options("s3cret-token"));
  CHECK_THAT(get(r.port(), "/livez"), Catch::StartsWith("HTTP/1.1 503"));
  r.server.publish({});
  CHECK(body(get(r.port(), "/livez")) == "ok\n");
  AdminSnapshot s;
  s.problem = "kafka unavailable: all brokers down";
  r.server.publish(s);
  const std::string degraded = get(r.port(), "/livez");
  CHECK_THAT(degraded, Catch::StartsWith("HTTP/1.1 200"));
  CHECK(body(degraded) == body(get(r.port(), "/healthz")));
  CHECK(body(degraded) == "degraded: kafka unavailable: all brokers down\n");
  CHECK_THAT(request(r.port(), "POST /livez HTTP/1.0\r\n\r\n"), Catch::StartsWith("HTTP/1.0 405"));
}

TEST_CASE("readyz is 503 from the moment a stop begins, with the reason, and healthz stays ok", "[admin]") {
  Running r;
  r.server.publish(sample_snapshot());
  REQUIRE(body(get(r.port(), "/readyz")) == "ready\n");
  CHECK(sample(body(get(r.port(), "/metrics")), "delayd_ready") == 1);
  r.server.begin_stop("signal 15 received, draining");
  CHECK(sample(body(get(r.port(), "/metrics")), "delayd_ready") == 0);
  const std::string stopping = get(r.port(), "/readyz");
  CHECK_THAT(stopping, Catch::StartsWith("HTTP/1.1 503"));
  CHECK(body(stopping) == "not ready: stopping (signal 15 received, draining)\n");
  // The loop keeps publishing while it drains: still not ready, and still alive.
  r.server.publish(sample_snapshot());
  CHECK(body(get(r.port(), "/readyz")) == "not ready: stopping (signal 15 received, draining)\n");
  CHECK(body(get(r.port(), "/healthz")) == "ok\n");
}

TEST_CASE("delayd_build_info names the project version, the git revision and the build type, value 1", "[admin]") {
  Running r;
  r.server.publish(sample_snapshot());
  const std::string text = body(get(r.port(), "/metrics"));
  const std::string series = std::string("delayd_build_info{build_type=\"") + delayd::build::kBuildType +
                             "\",revision=\"" + delayd::build::kRevision + "\",version=\"" + delayd::build::kVersion +
                             "\"}";
  INFO(text);
  CHECK(sample(text, series) == 1);
  CHECK_THAT(std::string(delayd::build::kVersion), Catch::Matches(R"(\d+\.\d+\.\d+)"));
  CHECK_THAT(std::string(delayd::build::kRevision), Catch::Matches("[0-9a-f]{4,40}|unknown"));
  CHECK_THAT(std::string(delayd::build::kBuildType), Catch::Matches("[A-Za-z]+"));
}

TEST_CASE("stats serves the last snapshot as JSON", "[admin]") {
  Running r;
  AdminSnapshot s;
  s.held = 7;
  s.in_wheel = 5;
  s.in_flight = 2;
  s.shards = {"delay-ingest:0"};
  s.next_due = 1'795'000'000'123;
  s.counters.fire.delivered = 42;
  s.counters.ingest.dead_lettered_by[delayd::broker::DeadLetterReason::too_large] = 3;
  s.max_turn = std::chrono::milliseconds(12);
  r.server.publish(s);
  const std::string response = get(r.port(), "/stats");
  REQUIRE_THAT(response, Catch::StartsWith("HTTP/1.1 200") && Catch::Contains("application/json"));
  const auto j = nlohmann::json::parse(body(response));
  CHECK(j["alive"] == true);
  CHECK(j["held"] == 7);
  CHECK(j["in_wheel"] == 5);
  CHECK(j["in_flight"] == 2);
  CHECK(j["shards"] == nlohmann::json::array({"delay-ingest:0"}));
  CHECK(j["next_due"] == 1'795'000'000'123);
  CHECK(j["next_due_iso"] == "2026-11-18T11:06:40.123Z");
  CHECK(j["counters"]["delivered"] == 42);
  CHECK(j["counters"]["accepted"] == 0);
  CHECK(j["counters"]["dead_lettered.too_large"] == 3);
  CHECK_FALSE(j["counters"].contains("dead_lettered.invalid_record"));  // only reasons that counted
  CHECK(j["counters"]["max_turn_ms"] == 12);
}

TEST_CASE("cron/next lists the next instants in the zone, and a bad query names its field", "[admin][cron]") {
  Running r;
  // Europe/Berlin's spring gap: 02:30 does not exist on 2026-03-29 and fires at 03:00 CEST.
  std::string response =
      get(r.port(), "/cron/next?expr=30%202%20*%20*%20*&tz=Europe/Berlin&from=2026-03-27T00:00:00Z&count=4");
  REQUIRE_THAT(response, Catch::StartsWith("HTTP/1.1 200"));
  nlohmann::json j = nlohmann::json::parse(body(response));
  CHECK(j["expr"] == "30 2 * * *");
  CHECK(j["tz"] == "Europe/Berlin");
  CHECK(j["complete"] == true);
  const nlohmann::json want = nlohmann::json::array({
      {{"at", "2026-03-27T02:30:00+01:00"}, {"epoch_ms", 1'774'575'000'000}},
      {{"at", "2026-03-28T02:30:00+01:00"}, {"epoch_ms", 1'774'661'400'000}},
      {{"at", "2026-03-29T03:00:00+02:00"}, {"epoch_ms", 1'774'746'000'000}},
      {{"at", "2026-03-30T02:30:00+02:00"}, {"epoch_ms", 1'774'830'600'000}},
  });
  CHECK(j["next"] == want);
  // The defaults: UTC, from now, 5 instants; seconds first with six fields.
  j = nlohmann::json::parse(body(get(r.port(), "/cron/next?expr=*/10%20*%20*%20*%20*%20*")));
  REQUIRE(j["next"].size() == 5);
  CHECK(j["tz"] == "UTC");
  CHECK(j["next"][1]["epoch_ms"].get<std::int64_t>() - j["next"][0]["epoch_ms"].get<std::int64_t>() == 10'000);
  CHECK(j["next"][0]["at"].get<std::string>().back() == 'Z');
  // Never: Feb 30.
  j = nlohmann::json::parse(body(get(r.port(), "/cron/next?expr=0%200%2030%202%20*")));
  CHECK(j["next"].empty());
  CHECK(j["complete"] == false);

  const auto field_of = [&](const std::string& query) {
    const std::string answer = get(r.port(), "/cron/next?" + query);
    REQUIRE_THAT(answer, Catch::StartsWith("HTTP/1.1 400"));
    return nlohmann::json::parse(body(answer))["field"].get<std::string>();
  };
  CHECK(field_of("tz=UTC") == "expr");
  CHECK(field_of("expr=61%20*%20*%20*%20*") == "expr");
  CHECK(field_of("expr=@daily&tz=Mars/Base") == "tz");
  CHECK(field_of("expr=@daily&from=yesterday") == "from");
  CHECK(field_of("expr=@daily&count=0") == "count");
  CHECK(field_of("expr=@daily&count=101") == "count");
  CHECK(field_of("expr=@daily&zone=UTC") == "zone");
  CHECK_THAT(get(r.port(), "/cron/next?expr=61%20*%20*%20*%20*"), Catch::Contains("minute: 61 is outside 0-59"));
}

TEST_CASE("stats carries the lateness histogram: bounds and non-cumulative counts", "[admin]") {
  Running r;
  r.server.publish(sample_snapshot());  // one lateness of 3 ms
  const auto j = nlohmann::json::parse(body(get(r.port(), "/stats")));
  const auto& l = j["lateness"];
  REQUIRE(l["bounds_s"].size() == delayd::broker::DurationHistogram::kBoundsSeconds.size());
  CHECK(l["bounds_s"][0] == 0.001);
  CHECK(l["bounds_s"].back() == 60.0);
  REQUIRE(l["counts"].size() == l["bounds_s"].size() + 1);
  CHECK(l["counts"][2] == 1);  // 2 ms < 3 ms <= 5 ms
  CHECK(l["count"] == 1);
}

TEST_CASE("overview: pending per business and shard and the due timeline, read at most every 2 s", "[admin]") {
  auto fake = std::make_unique<FakeJobs>();
  FakeJobs& jobs = *fake;
  Running r(options("s3cret-token"), std::move(fake));
  const std::string auth = "Authorization: Bearer s3cret-token\r\n";
  CHECK_THAT(get(r.port(), "/overview"), Catch::StartsWith("HTTP/1.1 401"));
  const std::string first = get(r.port(), "/overview", auth);
  REQUIRE_THAT(first, Catch::StartsWith("HTTP/1.1 200") && Catch::Contains("application/json"));
  const auto j = nlohmann::json::parse(body(first));
  CHECK(j["pending"] == 12);
  CHECK(j["pending_by_business"]["orders"] == 9);
  CHECK(j["pending_by_business"]["mail"] == 3);
  CHECK(j["pending_by_shard"]["delay-ingest:0"] == 12);
  CHECK(j["next_due"].get<std::int64_t>() - j["read_at"].get<std::int64_t>() == 30'000);
  REQUIRE(j["due"].size() == delayd::admin::kDueWindowsS.size() + 1);
  CHECK(j["due"][0]["window"] == "overdue");
  CHECK(j["due"][1]["window"] == "< 1 min");
  CHECK(j["due"][1]["count"] == 2);
  CHECK(j["due"][2]["window"] == "1-2 min");
  CHECK(j["due"][6]["window"] == "30 min-1 h");
  CHECK(j["due"][7]["window"] == "1-2 h");
  CHECK(j["due"][10]["window"] == "> 24 h");
  CHECK(j["due"][10]["from_s"] == 86400);
  CHECK(j["due"][10]["count"] == 10);

  // Within 2 s: the cached answer, however many ask.
  for (int i = 0; i < 5; ++i) CHECK_THAT(get(r.port(), "/overview", auth), Catch::StartsWith("HTTP/1.1 200"));
  CHECK(jobs.overview_calls == 1);
  // Later, a new read; a failing one is a 503 naming the cause (and is cached in turn).
  jobs.overview_fails = true;
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));
  CHECK_THAT(get(r.port(), "/overview", auth),
             Catch::StartsWith("HTTP/1.1 503") && Catch::Contains("redis unavailable"));
  CHECK_THAT(get(r.port(), "/overview", auth), Catch::StartsWith("HTTP/1.1 503"));
  CHECK(jobs.overview_calls == 2);
  CHECK_THAT(request(r.port(), "POST /overview HTTP/1.0\r\nAuthorization: Bearer s3cret-token\r\n\r\n"),
             Catch::StartsWith("HTTP/1.0 405"));

  Running without;
  CHECK_THAT(get(without.port(), "/overview"), Catch::StartsWith("HTTP/1.1 503"));
}

TEST_CASE("the status page at / is one self-contained document, served without the token", "[admin]") {
  Running r(options("s3cret-token"), std::make_unique<FakeJobs>());
  const std::string page = get(r.port(), "/");
  REQUIRE_THAT(page, Catch::StartsWith("HTTP/1.1 200") && Catch::Contains("Content-Type: text/html"));
  CHECK_THAT(page,
             Catch::Contains("Content-Security-Policy: default-src 'none'") && Catch::Contains("connect-src 'self'"));
  const std::string html = body(page);
  CHECK_THAT(html, Catch::StartsWith("<!doctype html>") && Catch::Contains("</html>"));
  // Nothing from elsewhere: no external scripts, styles, fonts or images, no absolute URLs but
  // the SVG namespace.
  for (const std::string bad : {"<script src", "<link", "@import", "url(", "<img", "<iframe", "https://"}) {
    INFO(bad);
    CHECK(html.find(bad) == std::string::npos);
  }
  std::string rest = html;
  for (std::size_t at; (at = rest.find("http://")) != std::string::npos; rest.erase(0, at + 7)) {
    CHECK(rest.compare(at, 26, "http://www.w3.org/2000/svg") == 0);
  }
  // The ids the stack test reads, and the endpoints it polls.
  for (const std::string id :
       {"id=\"held\"", "id=\"in_wheel\"", "id=\"in_flight\"", "id=\"next_due\"", "id=\"pending\"", "id=\"delivered\"",
        "id=\"accepted\"", "id=\"problem\"", "id=\"polls\"", "\"/stats\"", "\"/overview\"", "\"/jobs/\"",
        "#token=", "Bearer ", "\"/whoami\"", "read-only", "id=\"access\""}) {
    INFO(id);
    CHECK(html.find(id) != std::string::npos);
  }
  CHECK_THAT(get(r.port(), "/?x=1"), Catch::StartsWith("HTTP/1.1 200"));
  CHECK_THAT(request(r.port(), "POST / HTTP/1.0\r\n\r\n"), Catch::StartsWith("HTTP/1.0 405"));
}

TEST_CASE("other paths, other methods and garbage get the right refusal", "[admin]") {
  Running r;
  CHECK_THAT(get(r.port(), "/nothing"), Catch::StartsWith("HTTP/1.1 404"));
  CHECK_THAT(request(r.port(), "POST /stats HTTP/1.0\r\n\r\n"), Catch::StartsWith("HTTP/1.0 405"));
  CHECK_THAT(request(r.port(), "POST /healthz HTTP/1.0\r\n\r\n"), Catch::StartsWith("HTTP/1.0 405"));
  CHECK_THAT(request(r.port(), "nonsense\r\n\r\n"), Catch::StartsWith("HTTP/1.1 400"));
  CHECK_THAT(request(r.port(), "GET /healthz HTTP/1.1\r\nbad header line\r\n\r\n"), Catch::StartsWith("HTTP/1.1 400"));
}

TEST_CASE("two requests on one kept-alive connection", "[admin]") {
  Running r;
  r.server.publish({});
  asio::io_context io;
  tcp::socket socket(io);
  socket.connect(at(r.port()));
  std::string pending;
  asio::write(socket, asio::buffer(std::string("GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")));
  const std::string first = read_one(socket, pending);
  CHECK_THAT(first, Catch::StartsWith("HTTP/1.1 200") && Catch::EndsWith("ok\n"));
  asio::write(socket, asio::buffer(std::string("GET /stats HTTP/1.1\r\nHost: t\r\n\r\n")));
  const std::string second = read_one(socket, pending);
  CHECK_THAT(second, Catch::StartsWith("HTTP/1.1 200") && Catch::Contains("\"held\""));
  // Pipelined: two requests in one write, two answers in order.
  asio::write(
      socket,
      asio::buffer(std::string("GET /healthz HTTP/1.1\r\nHost: t\r\n\r\nGET /readyz HTTP/1.1\r\nHost: t\r\n\r\n")));
  CHECK_THAT(read_one(socket, pending), Catch::EndsWith("ok\n"));
  CHECK_THAT(read_one(socket, pending), Catch::EndsWith("ready\n"));
}

TEST_CASE("jobs go to the backend on the worker, and its failures are 503s", "[admin]") {
  Running r(options(), std::make_unique<FakeJobs>());
  const std::string found = get(r.port(), "/jobs/a%2Fb");
  REQUIRE_THAT(found, Catch::StartsWith("HTTP/1.1 200") && Catch::Contains("application/json"));
  CHECK(nlohmann::json::parse(body(found))["job_id"] == "a/b");
  CHECK_THAT(get(r.port(), "/jobs/nope"), Catch::StartsWith("HTTP/1.1 404"));
  const std::string failed = get(r.port(), "/jobs/boom");
  CHECK_THAT(failed, Catch::StartsWith("HTTP/1.1 503") && Catch::Contains("redis unavailable"));
  const std::string cancel = request(r.port(), "DELETE /jobs/x HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
  CHECK_THAT(cancel, Catch::StartsWith("HTTP/1.1 409") && Catch::Contains("\"cancelled\":false"));
  CHECK_THAT(get(r.port(), "/jobs/"), Catch::StartsWith("HTTP/1.1 400"));
  CHECK_THAT(get(r.port(), "/jobs/a/b"), Catch::StartsWith("HTTP/1.1 400"));
  CHECK_THAT(request(r.port(), "PUT /jobs/x HTTP/1.0\r\n\r\n"), Catch::StartsWith("HTTP/1.0 405"));

  Running without;
  CHECK_THAT(get(without.port(), "/jobs/x"), Catch::StartsWith("HTTP/1.1 503"));
}

TEST_CASE("a 100 KB header gets 431 and a large body 413, and healthz still answers", "[admin][limits]") {
  Running r;
  r.server.publish({});
  const std::string huge = get(r.port(), "/healthz", "X-Pad: " + std::string(100 * 1024, 'a') + "\r\n");
  // The answer, or a reset if the server closed while the client was still writing.
  if (!huge.empty()) CHECK_THAT(huge, Catch::StartsWith("HTTP/1.1 431"));
  std::string many_lines;
  for (int i = 0; i < 2000; ++i) many_lines += "X-" + std::to_string(i) + ": y\r\n";
  const std::string many = get(r.port(), "/healthz", many_lines);
  if (!many.empty()) CHECK_THAT(many, Catch::StartsWith("HTTP/1.1 431"));
  const std::string big_body =
      request(r.port(), "POST /stats HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\n" + std::string(100000, 'b'));
  if (!big_body.empty()) CHECK_THAT(big_body, Catch::StartsWith("HTTP/1.1 413"));
  CHECK(body(get(r.port(), "/healthz")) == "ok\n");
}

TEST_CASE("500 idle connections neither lock out healthz nor outlive the read timeout", "[admin][limits]") {
  Running r(options("", 64, std::chrono::milliseconds(1500)));
  r.server.publish({});
  asio::io_context io;
  std::vector<tcp::socket> idle;
  for (int i = 0; i < 500; ++i) {
    idle.emplace_back(io).connect(at(r.port()));
    if (i == 20) asio::write(idle.back(), asio::buffer(std::string("GET /hea")));  // a slowloris start
  }
  // The cap closes the oldest waiting connections to make room: a probe always gets in.
  const auto started = std::chrono::steady_clock::now();
  for (int i = 0; i < 5; ++i) CHECK(body(get(r.port(), "/healthz")) == "ok\n");
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(1));
  const std::string metrics = get(r.port(), "/metrics");
  CHECK(sample(metrics, "delayd_admin_connections_open") <= 64);
  CHECK(sample(metrics, "delayd_admin_connections_closed_total{reason=\"evicted\"}") >= 500 - 64);

  // The newest idle connections (still open) are closed by the deadline.
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  int closed = 0;
  for (std::size_t i = idle.size() - 40; i < idle.size(); ++i) {
    idle[i].non_blocking(true);
    char c;
    boost::system::error_code ec;
    idle[i].read_some(asio::buffer(&c, 1), ec);
    if (ec && ec != asio::error::would_block) ++closed;
  }
  CHECK(closed == 40);
  CHECK(sample(get(r.port(), "/metrics"), "delayd_admin_connections_closed_total{reason=\"timeout\"}") >= 40);
  CHECK(body(get(r.port(), "/healthz")) == "ok\n");
}

TEST_CASE("metrics: the counters follow the snapshots", "[admin][metrics]") {
  Running r(options(), std::make_unique<FakeJobs>());
  AdminSnapshot s = sample_snapshot();
  r.server.publish(s);
  const std::string first = get(r.port(), "/metrics");
  REQUIRE_THAT(first, Catch::StartsWith("HTTP/1.1 200") && Catch::Contains("text/plain; version=0.0.4"));
  const std::string text = body(first);
  CHECK(sample(text, "delayd_jobs_accepted_total") == 3);
  CHECK(sample(text, "delayd_jobs_delivered_total") == 2);
  CHECK(sample(text, "delayd_jobs_cancelled_total") == 1);
  CHECK(sample(text, "delayd_jobs_dead_lettered_total{reason=\"any\"}") == 1);
  CHECK(sample(text, "delayd_delivery_attempts_total{outcome=\"delivered\"}") == 2);
  CHECK(sample(text, "delayd_jobs_held") == 7);
  CHECK(sample(text, "delayd_wheel_timers") == 5);
  CHECK(sample(text, "delayd_outage{dependency=\"redis\"}") == 0);
  CHECK(sample(text, "delayd_lateness_seconds_count") == 1);
  CHECK(sample(text, "delayd_lateness_seconds_bucket{le=\"0.005\"}") == 1);
  CHECK(sample(text, "delayd_lateness_seconds_bucket{le=\"0.002\"}") == 0);
  CHECK(sample(text, "delayd_redis_request_seconds_count") == 1);
  CHECK(sample(text, "delayd_kafka_produce_seconds_count") == 1);
  CHECK(sample(text, "delayd_transaction_commit_seconds_count") == 1);
  CHECK(sample(text, "delayd_transaction_commit_seconds_bucket{le=\"0.05\"}") == 1);
  CHECK(sample(text, "delayd_transaction_commit_seconds_bucket{le=\"0.025\"}") == 0);
  CHECK(sample(text, "process_open_fds") > 0);
  CHECK(sample(text, "process_resident_memory_bytes") > 0);
  CHECK(text.find("delayd_next_due_seconds ") == std::string::npos);  // no timer, no value
  CHECK(sample(text, "delayd_payloads_compressed_total") == 0);
  CHECK(sample(text, "delayd_compression_dictionary") == 0);
  CHECK(sample(text, "delayd_redis_may_drop_waiting_jobs") == 0);

  r.server.publish(busy_snapshot());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the pending counts come from the worker
  const std::string second = body(get(r.port(), "/metrics"));
  CHECK(sample(second, "delayd_jobs_accepted_total") == 10);
  CHECK(sample(second, "delayd_jobs_dead_lettered_total{reason=\"any\"}") == 4);
  CHECK(sample(second, "delayd_lateness_seconds_count") == 2);
  CHECK(sample(second, "delayd_rebalances_total") == 2);
  CHECK(sample(second, "delayd_outage{dependency=\"kafka\"}") == 1);
  CHECK(sample(second, "delayd_jobs_pending{shard=\"delay-ingest:0\"}") == 12);
  CHECK(sample(second, "delayd_jobs{business=\"orders\",state=\"finished\"}") == 3);
  CHECK(sample(second, "delayd_reports_total{status=\"failed\"}") == 6);
  CHECK(sample(second, "delayd_delivery_attempts_total{outcome=\"redelivered\"}") == 2);
  CHECK(sample(second, "delayd_payloads_compressed_total") == 3);
  CHECK(sample(second, "delayd_payload_bytes_total{form=\"encoded\"}") == 3000);
  CHECK(sample(second, "delayd_payload_bytes_total{form=\"stored\"}") == 700);
  CHECK(sample(second, "delayd_compression_dictionary") == 12345);
  CHECK(sample(second, "delayd_next_due_seconds") > 25);
  CHECK(sample(second, "delayd_next_due_seconds") <= 30);
}

// Its own case, so that a missing promtool skips (or, under CI, fails) only this check.
TEST_CASE("promtool accepts the text of /metrics", "[admin][metrics]") {
  const char* promtool_env = std::getenv("PROMTOOL");
  const std::string promtool = delayd::testing::require_tool(
      promtool_env ? promtool_env : "promtool", "Debian package prometheus; scripts/install-deps.sh installs it");
  Running r(options(), std::make_unique<FakeJobs>());
  r.server.publish(busy_snapshot());
  call(r.port(), "DELETE", "/jobs/x");  // an audited action: delayd_admin_actions_total has a sample
  get(r.port(), "/metrics");            // asks the worker for the pending counts, which the next scrape shows
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const std::string text = body(get(r.port(), "/metrics"));
  REQUIRE(sample(text, "delayd_jobs_pending{shard=\"delay-ingest:0\"}") == 12);
  REQUIRE(sample(text, "delayd_admin_actions_total{action=\"cancel\",outcome=\"conflict\"}") == 1);
  const std::string file = "/tmp/delayd-admin-metrics-" + std::to_string(r.port()) + ".txt";
  std::ofstream(file) << text;
  const std::string out_file = file + ".out";
  const int status = std::system((promtool + " check metrics < " + file + " > " + out_file + " 2>&1").c_str());
  std::ifstream out_in(out_file);
  const std::string out((std::istreambuf_iterator<char>(out_in)), std::istreambuf_iterator<char>());
  INFO(out);
  CHECK(status == 0);
  std::remove(file.c_str());
  std::remove(out_file.c_str());
}

TEST_CASE("job_id_of takes /jobs/{id}, %XX-decoded, and nothing else", "[admin]") {
  using delayd::admin::job_id_of;
  CHECK(job_id_of("/jobs/abc") == "abc");
  CHECK(job_id_of("/jobs/a%2Fb%20c") == "a/b c");
  CHECK(job_id_of("/jobs/") == std::nullopt);
  CHECK(job_id_of("/jobs/a/b") == std::nullopt);
  CHECK(job_id_of("/jobs/a%2") == std::nullopt);
  CHECK(job_id_of("/jobs/a%zz") == std::nullopt);
  CHECK(job_id_of("/stats") == std::nullopt);
  CHECK(delayd::admin::target_path("/metrics?x=1") == "/metrics");
}

TEST_CASE("a taken port or a bad address stops start-up with a message naming admin.listen", "[admin]") {
  Running r;
  asio::io_context io;
  AdminOptions taken = options();
  taken.listen = "127.0.0.1:" + std::to_string(r.port());
  CHECK_THROWS_WITH(AdminServer(io, taken), Catch::Contains("admin.listen") && Catch::Contains("cannot listen"));
  AdminOptions bad = options();
  bad.listen = "not-an-ip:80";
  CHECK_THROWS_WITH(AdminServer(io, bad), Catch::Contains("admin.listen") && Catch::Contains("IP address"));
}
