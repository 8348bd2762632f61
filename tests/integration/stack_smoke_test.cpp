// Smoke test of the local stack, written straight against librdkafka and hiredis (not delayd's
// own wrappers) so that it tells "the stack is broken" apart from "delayd is broken":
//   - a record with headers goes to a real Kafka topic and comes back with the same headers;
//   - a Redis sorted set is written and read back in score order.
#include <hiredis/hiredis.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafkacpp.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "support/test_env.hpp"

namespace {

using delayd::testing::require_env;
using delayd::testing::unique_name;

// Topic auto-creation is off on the stack, as in production, so the test creates its topic.
void create_topic(const std::string& bootstrap, const std::string& topic) {
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  REQUIRE(rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap.c_str(), err, sizeof err) == RD_KAFKA_CONF_OK);
  std::unique_ptr<rd_kafka_t, decltype(&rd_kafka_destroy)> rk(rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err),
                                                              &rd_kafka_destroy);
  REQUIRE(rk != nullptr);
  std::unique_ptr<rd_kafka_NewTopic_t, decltype(&rd_kafka_NewTopic_destroy)> nt(
      rd_kafka_NewTopic_new(topic.c_str(), 1, 1, err, sizeof err), &rd_kafka_NewTopic_destroy);
  REQUIRE(nt != nullptr);
  std::unique_ptr<rd_kafka_queue_t, decltype(&rd_kafka_queue_destroy)> q(rd_kafka_queue_new(rk.get()),
                                                                         &rd_kafka_queue_destroy);
  rd_kafka_NewTopic_t* topics[] = {nt.get()};
  rd_kafka_CreateTopics(rk.get(), topics, 1, nullptr, q.get());
  std::unique_ptr<rd_kafka_event_t, decltype(&rd_kafka_event_destroy)> ev(rd_kafka_queue_poll(q.get(), 30000),
                                                                          &rd_kafka_event_destroy);
  REQUIRE(ev != nullptr);
  REQUIRE(rd_kafka_event_error(ev.get()) == RD_KAFKA_RESP_ERR_NO_ERROR);
  size_t n = 0;
  const rd_kafka_topic_result_t** results =
      rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev.get()), &n);
  REQUIRE(n == 1);
  INFO(rd_kafka_err2str(rd_kafka_topic_result_error(results[0])));
  REQUIRE(rd_kafka_topic_result_error(results[0]) == RD_KAFKA_RESP_ERR_NO_ERROR);
}

std::unique_ptr<RdKafka::Conf> make_conf(const std::vector<std::pair<std::string, std::string>>& kv) {
  std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  std::string err;
  for (const auto& [k, v] : kv) {
    INFO(k << "=" << v << ": " << err);
    REQUIRE(conf->set(k, v, err) == RdKafka::Conf::CONF_OK);
  }
  return conf;
}

}  // namespace

TEST_CASE("a record with headers makes the round trip through the real Kafka", "[kafka]") {
  const std::string bootstrap = require_env("KAFKA_BOOTSTRAP");
  const std::string topic = unique_name("smoke");
  create_topic(bootstrap, topic);

  {
    std::string err;
    auto conf = make_conf({{"bootstrap.servers", bootstrap}, {"enable.idempotence", "true"}});
    std::unique_ptr<RdKafka::Producer> producer(RdKafka::Producer::create(conf.get(), err));
    REQUIRE(producer != nullptr);
    std::unique_ptr<RdKafka::Headers> headers(RdKafka::Headers::create());
    headers->add("deliver-at", "1795000000123");
    headers->add("business", "orders");
    std::string key = "k1", value = "hello, stack";
    const RdKafka::ErrorCode rc = producer->produce(topic, 0, RdKafka::Producer::RK_MSG_COPY, value.data(),
                                                    value.size(), key.data(), key.size(), 0, headers.get(), nullptr);
    if (rc == RdKafka::ERR_NO_ERROR) (void)headers.release();  // librdkafka owns them now
    REQUIRE(rc == RdKafka::ERR_NO_ERROR);
    REQUIRE(producer->flush(30000) == RdKafka::ERR_NO_ERROR);
    REQUIRE(producer->outq_len() == 0);
  }

  std::string err;
  auto conf = make_conf({{"bootstrap.servers", bootstrap},
                         {"group.id", unique_name("smoke")},
                         {"auto.offset.reset", "earliest"},
                         {"enable.auto.commit", "false"}});
  std::unique_ptr<RdKafka::KafkaConsumer> consumer(RdKafka::KafkaConsumer::create(conf.get(), err));
  REQUIRE(consumer != nullptr);
  REQUIRE(consumer->subscribe({topic}) == RdKafka::ERR_NO_ERROR);

  std::unique_ptr<RdKafka::Message> got;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    std::unique_ptr<RdKafka::Message> m(consumer->consume(500));
    if (m->err() == RdKafka::ERR_NO_ERROR) {
      got = std::move(m);
      break;
    }
    INFO(m->errstr());
    REQUIRE((m->err() == RdKafka::ERR__TIMED_OUT || m->err() == RdKafka::ERR__PARTITION_EOF));
  }
  REQUIRE(got != nullptr);
  CHECK(*got->key() == "k1");
  CHECK(std::string(static_cast<const char*>(got->payload()), got->len()) == "hello, stack");
  RdKafka::Headers* h = got->headers();
  REQUIRE(h != nullptr);
  const std::vector<RdKafka::Headers::Header> all = h->get_all();
  REQUIRE(all.size() == 2);
  CHECK(all[0].key() == "deliver-at");
  CHECK(std::string(static_cast<const char*>(all[0].value()), all[0].value_size()) == "1795000000123");
  CHECK(all[1].key() == "business");
  CHECK(std::string(static_cast<const char*>(all[1].value()), all[1].value_size()) == "orders");
  consumer->close();
}

TEST_CASE("a sorted set is written to and read back from the real Redis", "[redis]") {
  const std::string url = require_env("REDIS_URL");
  const std::string prefix = "redis://";
  REQUIRE(url.rfind(prefix, 0) == 0);
  const std::string hostport = url.substr(prefix.size());
  const auto colon = hostport.rfind(':');
  REQUIRE(colon != std::string::npos);
  const std::string host = hostport.substr(0, colon);
  const int port = std::stoi(hostport.substr(colon + 1));

  std::unique_ptr<redisContext, decltype(&redisFree)> c(redisConnect(host.c_str(), port), &redisFree);
  REQUIRE(c != nullptr);
  INFO(c->errstr);
  REQUIRE(c->err == 0);
  auto cmd = [&](auto... args) {
    std::unique_ptr<redisReply, decltype(&freeReplyObject)> r(static_cast<redisReply*>(redisCommand(c.get(), args...)),
                                                              &freeReplyObject);
    REQUIRE(r != nullptr);
    REQUIRE(r->type != REDIS_REPLY_ERROR);
    return r;
  };
  const std::string key = unique_name("smoke:zset");
  cmd("ZADD %s 300 %s 100 %s 200 %s", key.c_str(), "c", "a", "b");
  auto r = cmd("ZRANGE %s 0 -1 WITHSCORES", key.c_str());
  REQUIRE(r->type == REDIS_REPLY_ARRAY);
  REQUIRE(r->elements == 6);
  CHECK(std::string(r->element[0]->str) == "a");
  CHECK(std::string(r->element[1]->str) == "100");
  CHECK(std::string(r->element[2]->str) == "b");
  CHECK(std::string(r->element[4]->str) == "c");
  CHECK(std::string(r->element[5]->str) == "300");
  cmd("DEL %s", key.c_str());
  auto gone = cmd("EXISTS %s", key.c_str());
  CHECK(gone->integer == 0);
}
