// TopicCreator: makes ready topics exist without ever making the scheduling loop wait for it.
//
// Creating a topic is an admin round trip that can take seconds (up to its 30 s timeout when
// Kafka is slow), so it runs on a thread of its own with its own admin client. The loop only
// asks (request(), which never blocks on Kafka) and goes on; a job accepted for a topic that is
// still being created is held like any other, and if it falls due first its delivery fails
// as unknown_topic: retried every retry_outage_ms without spending attempts until the topic is
// there, and dead-lettered only if it stays missing for kafka.missing_topic_timeout_ms
// (fire_path.hpp).
// A failed creation is retried with backoff (1 s doubling to 60 s) for as long as delayd runs.
// A topic that disappears later (deleted by an operator) is asked for again by recreate(), which
// the service calls through FireOptions::on_missing_topic when a delivery finds the topic
// unknown.
//
// The cap: every ready topic name is a business name a producer chose, so with creation on, a
// producer could make delayd create topics without end. request() refuses a topic that would be
// the (max_topics + 1)-th distinct one asked for in this process's life; the caller dead-letters
// its records (kafka.max_ready_topics; an allow-list of businesses is the stronger guard, see
// IngestRules::allowed_businesses).
//
// Threading: request(), recreate() and requested() from any thread (the ingest thread asks for
// new topics, the loop's fire path for missing ones again); the worker thread owns the admin
// client. The destructor stops and joins the worker (it may wait for one
// admin call).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "connectors/kafka_admin.hpp"

namespace delayd::broker {

class TopicCreator {
 public:
  struct Options {
    int partitions = 4;
    int replication = 1;
    std::size_t max_topics = 1000;
  };
  // Throws KafkaConfigError if the admin client cannot be built.
  TopicCreator(const connectors::Properties& admin_properties, Options options);
  ~TopicCreator();
  TopicCreator(const TopicCreator&) = delete;
  TopicCreator& operator=(const TopicCreator&) = delete;

  // Asks for `topic` to exist. Returns at once: true if it is (or will be) asked for, false if it
  // would be a new topic beyond the cap.
  bool request(const std::string& topic);
  // `topic` turned out not to exist (a delivery found it unknown: deleted under delayd, say):
  // asks for it again even if it was asked for before. Returns at once; false only if it was
  // never asked for and would be beyond the cap.
  bool recreate(const std::string& topic);
  // Distinct topics asked for so far.
  std::size_t requested() const;

 private:
  void work(const connectors::Properties& admin_properties);

  Options options_;
  std::set<std::string> known_;  // guarded by mutex_: every topic asked for; the worker never reads it
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::string> queue_;  // guarded by mutex_
  bool stop_ = false;              // guarded by mutex_
  std::thread worker_;
};

}  // namespace delayd::broker
