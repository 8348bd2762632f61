// The admin endpoint's tokens (admin and read), what each may do, and the audit log of the
// requests that change something, over real loopback sockets (admin_server_harness.hpp).
#include "admin_server_harness.hpp"

using namespace delayd::admin::test;

TEST_CASE("with admin.token, all but healthz and readyz ask for the bearer token", "[admin]") {
  Running r(options("s3cret-token"), std::make_unique<FakeJobs>());
  r.server.publish(sample_snapshot());
  CHECK_THAT(get(r.port(), "/healthz"), Catch::StartsWith("HTTP/1.1 200"));
  CHECK_THAT(get(r.port(), "/readyz"), Catch::StartsWith("HTTP/1.1 200"));
  for (const std::string path : {"/metrics", "/stats", "/overview", "/jobs/a", "/whoami"}) {
    INFO(path);
    const std::string none = get(r.port(), path);
    CHECK_THAT(none, Catch::StartsWith("HTTP/1.1 401") && Catch::Contains("WWW-Authenticate: Bearer"));
    CHECK_THAT(get(r.port(), path, "Authorization: Bearer wrong\r\n"), Catch::StartsWith("HTTP/1.1 401"));
    CHECK_THAT(get(r.port(), path, "Authorization: Bearer s3cret-token-and-more\r\n"),
               Catch::StartsWith("HTTP/1.1 401"));
    CHECK_THAT(get(r.port(), path, "Authorization: Basic s3cret-token\r\n"), Catch::StartsWith("HTTP/1.1 401"));
    CHECK_THAT(get(r.port(), path, "Authorization: Bearer s3cret-token\r\n"), Catch::StartsWith("HTTP/1.1 200"));
    CHECK_THAT(get(r.port(), path, "Authorization: bearer s3cret-token\r\n"), Catch::StartsWith("HTTP/1.1 200"));
    CHECK_THAT(get(r.port(), path, "Authorization: Bearer \r\n"), Catch::StartsWith("HTTP/1.1 401"));
  }
  CHECK_THAT(get(r.port(), "/nothing"), Catch::StartsWith("HTTP/1.1 404"));  // no hint of what exists
}

TEST_CASE("the read token reads everything and changes nothing, the admin token does both", "[admin][access]") {
  auto fake = std::make_unique<FakeJobs>();
  FakeJobs& jobs = *fake;
  Running r(with_tokens("admin-secret", "read-secret"), std::move(fake));
  r.server.publish(sample_snapshot());
  CapturedLog log;

  for (const std::string path : {"/stats", "/metrics", "/overview", "/jobs/x", "/whoami"}) {
    INFO(path);
    CHECK_THAT(call(r.port(), "GET", path, "read-secret"), Catch::StartsWith("HTTP/1.1 200"));
    CHECK_THAT(call(r.port(), "GET", path, "admin-secret"), Catch::StartsWith("HTTP/1.1 200"));
    CHECK_THAT(call(r.port(), "GET", path, "wrong"), Catch::StartsWith("HTTP/1.1 401"));
    CHECK_THAT(call(r.port(), "GET", path), Catch::StartsWith("HTTP/1.1 401"));
  }
  CHECK(nlohmann::json::parse(body(call(r.port(), "GET", "/whoami", "read-secret"))) ==
        nlohmann::json{{"access", "read"}});
  CHECK(nlohmann::json::parse(body(call(r.port(), "GET", "/whoami", "admin-secret"))) ==
        nlohmann::json{{"access", "admin"}});
  // HEAD reads: the read token passes, and /stats answers it as it always has.
  CHECK_THAT(call(r.port(), "HEAD", "/stats", "read-secret"), Catch::StartsWith("HTTP/1.1 405"));

  // A write with the read token: 403, the backend never asked, an audit line.
  const std::string refused = call(r.port(), "DELETE", "/jobs/x", "read-secret");
  REQUIRE_THAT(refused, Catch::StartsWith("HTTP/1.1 403") && Catch::Contains("application/json"));
  CHECK(nlohmann::json::parse(body(refused)) ==
        nlohmann::json{{"error", "the read token cannot change anything (admin.read_token); use admin.token"}});
  CHECK_THAT(call(r.port(), "POST", "/stats", "read-secret"), Catch::StartsWith("HTTP/1.1 403"));
  CHECK_THAT(call(r.port(), "DELETE", "/jobs/x", "wrong"), Catch::StartsWith("HTTP/1.1 401"));
  CHECK_THAT(call(r.port(), "DELETE", "/jobs/x"), Catch::StartsWith("HTTP/1.1 401"));
  CHECK(jobs.cancel_calls == 0);

  // The admin token writes.
  CHECK_THAT(call(r.port(), "DELETE", "/jobs/x", "admin-secret"), Catch::StartsWith("HTTP/1.1 409"));
  CHECK_THAT(call(r.port(), "DELETE", "/jobs/live", "admin-secret"), Catch::StartsWith("HTTP/1.1 200"));
  CHECK(jobs.cancel_calls == 2);

  // Each write counted once, by action and outcome; the refused ones too.
  const std::string metrics = body(call(r.port(), "GET", "/metrics", "read-secret"));
  CHECK(sample(metrics, "delayd_admin_actions_total{action=\"cancel\",outcome=\"refused\"}") == 1);
  CHECK(sample(metrics, "delayd_admin_actions_total{action=\"other\",outcome=\"refused\"}") == 1);
  CHECK(sample(metrics, "delayd_admin_actions_total{action=\"cancel\",outcome=\"conflict\"}") == 1);
  CHECK(sample(metrics, "delayd_admin_actions_total{action=\"cancel\",outcome=\"ok\"}") == 1);

  // One audit line each, naming the access level and never a token.
  const std::string lines = log.text();
  INFO(lines);
  CHECK_THAT(lines,
             Catch::Contains(R"(admin action: {"access":"read","action":"cancel","target":"x","outcome":"refused"})"
                             "\n"));
  CHECK_THAT(lines,
             Catch::Contains(
                 R"(admin action: {"access":"read","action":"other","target":"POST /stats","outcome":"refused"})"));
  CHECK_THAT(lines, Catch::Contains(
                        R"(admin action: {"access":"admin","action":"cancel","target":"x","outcome":"conflict"})"));
  CHECK_THAT(lines,
             Catch::Contains(R"(admin action: {"access":"admin","action":"cancel","target":"live","outcome":"ok"})"));
  std::size_t count = 0;
  for (std::size_t at = 0; (at = lines.find("admin action:", at)) != std::string::npos; ++at) ++count;
  CHECK(count == 4);
  CHECK(lines.find("secret") == std::string::npos);
}

TEST_CASE("with only the read token set, nobody may write", "[admin][access]") {
  auto fake = std::make_unique<FakeJobs>();
  FakeJobs& jobs = *fake;
  Running r(with_tokens("", "read-secret"), std::move(fake));
  CHECK_THAT(call(r.port(), "GET", "/stats", "read-secret"), Catch::StartsWith("HTTP/1.1 200"));
  CHECK_THAT(call(r.port(), "GET", "/stats"), Catch::StartsWith("HTTP/1.1 401"));
  CHECK(nlohmann::json::parse(body(call(r.port(), "GET", "/whoami", "read-secret")))["access"] == "read");
  CHECK_THAT(call(r.port(), "DELETE", "/jobs/x", "read-secret"), Catch::StartsWith("HTTP/1.1 403"));
  CHECK_THAT(call(r.port(), "DELETE", "/jobs/x"), Catch::StartsWith("HTTP/1.1 401"));
  CHECK(jobs.cancel_calls == 0);
}

TEST_CASE("without a token, access is open and cancels are audited as open", "[admin][access]") {
  Running r(options(), std::make_unique<FakeJobs>());
  CapturedLog log;
  CHECK(nlohmann::json::parse(body(call(r.port(), "GET", "/whoami")))["access"] == "open");
  CHECK_THAT(call(r.port(), "GET", "/whoami", "anything"), Catch::StartsWith("HTTP/1.1 200"));
  CHECK_THAT(call(r.port(), "POST", "/whoami"), Catch::StartsWith("HTTP/1.1 405"));
  CHECK_THAT(call(r.port(), "DELETE", "/jobs/nope"), Catch::StartsWith("HTTP/1.1 404"));
  CHECK_THAT(call(r.port(), "DELETE", "/jobs/live"), Catch::StartsWith("HTTP/1.1 200"));
  const std::string metrics = body(call(r.port(), "GET", "/metrics"));
  CHECK(sample(metrics, "delayd_admin_actions_total{action=\"cancel\",outcome=\"not_found\"}") == 1);
  CHECK(sample(metrics, "delayd_admin_actions_total{action=\"cancel\",outcome=\"ok\"}") == 1);
  CHECK_THAT(
      log.text(),
      Catch::Contains(R"(admin action: {"access":"open","action":"cancel","target":"nope","outcome":"not_found"})"));
}

TEST_CASE("audit entries: their JSON, the outcome of each status, the action a request asks for", "[admin][audit]") {
  using namespace delayd::admin;
  AuditEntry bulk{
      Access::admin, AuditAction::bulk_cancel, {{"business", "orders"}}, AuditCounts{12, 10, 2, 0}, AuditOutcome::ok};
  CHECK(audit_json(bulk) == R"({"access":"admin","action":"bulk-cancel","target":{"business":"orders"},)"
                            R"("counts":{"matched":12,"done":10,"skipped":2,"failed":0},"outcome":"ok"})");
  // A job id of any bytes stays one line of valid JSON.
  const std::string odd =
      audit_json({Access::read, AuditAction::cancel, "a\n\"b\xff", std::nullopt, AuditOutcome::refused});
  CHECK(odd.find('\n') == std::string::npos);
  CHECK(nlohmann::json::parse(odd)["target"] == "a\n\"b\xef\xbf\xbd");

  CHECK(outcome_of_status(200) == AuditOutcome::ok);
  CHECK(outcome_of_status(204) == AuditOutcome::ok);
  CHECK(outcome_of_status(202) == AuditOutcome::pending);
  CHECK(outcome_of_status(400) == AuditOutcome::invalid);
  CHECK(outcome_of_status(403) == AuditOutcome::refused);
  CHECK(outcome_of_status(404) == AuditOutcome::not_found);
  CHECK(outcome_of_status(409) == AuditOutcome::conflict);
  CHECK(outcome_of_status(503) == AuditOutcome::error);
  CHECK(outcome_of_status(500) == AuditOutcome::error);
  for (auto a : {AuditAction::cancel, AuditAction::run_now, AuditAction::reschedule, AuditAction::retry,
                 AuditAction::bulk_cancel, AuditAction::redrive, AuditAction::other}) {
    CHECK_FALSE(to_string(a).empty());
  }
  CHECK(to_string(AuditAction::run_now) == "run-now");

  const AuditEntry cancel = requested_action(boost::beast::http::verb::delete_, "/jobs/a%2Fb");
  CHECK(cancel.action == AuditAction::cancel);
  CHECK(cancel.target == "a/b");
  const AuditEntry other = requested_action(boost::beast::http::verb::patch, "/jobs/a");
  CHECK(other.action == AuditAction::other);
  CHECK(other.target == "PATCH /jobs/a");
}

TEST_CASE("GET and HEAD read, every other method writes", "[admin][access]") {
  using delayd::admin::is_write;
  CHECK(is_write(boost::beast::http::verb::post));
  CHECK(is_write(boost::beast::http::verb::put));
  CHECK(is_write(boost::beast::http::verb::patch));
  CHECK(is_write(boost::beast::http::verb::delete_));
  CHECK_FALSE(is_write(boost::beast::http::verb::get));
  CHECK_FALSE(is_write(boost::beast::http::verb::head));
}
