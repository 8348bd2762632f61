#include "broker/topic_creator.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <map>

#include "base/backoff.hpp"
#include "base/thread_name.hpp"

namespace delayd::broker {

TopicCreator::TopicCreator(const connectors::Properties& admin_properties, Options options) : options_(options) {
  // Built here, so that a bad property fails start-up instead of a thread.
  connectors::KafkaAdmin probe(admin_properties);
  worker_ = std::thread([this, admin_properties] { work(admin_properties); });
}

TopicCreator::~TopicCreator() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  worker_.join();
}

bool TopicCreator::request(const std::string& topic) {
  {
    std::lock_guard lock(mutex_);
    if (known_.count(topic) != 0) return true;
    if (known_.size() >= options_.max_topics) return false;
    known_.insert(topic);
    queue_.push_back(topic);
  }
  wake_.notify_one();
  return true;
}

bool TopicCreator::recreate(const std::string& topic) {
  {
    std::lock_guard lock(mutex_);
    if (known_.count(topic) == 0) {
      if (known_.size() >= options_.max_topics) return false;
      known_.insert(topic);
    }
    if (std::find(queue_.begin(), queue_.end(), topic) == queue_.end()) queue_.push_back(topic);
  }
  wake_.notify_one();
  return true;
}

std::size_t TopicCreator::requested() const {
  std::lock_guard lock(mutex_);
  return known_.size();
}

void TopicCreator::work(const connectors::Properties& admin_properties) {
  base::name_this_thread("topics");
  using Clock = std::chrono::steady_clock;
  connectors::KafkaAdmin admin(admin_properties);
  // topic -> when to try again, and the backoff between tries (1 s doubling to 60 s)
  std::map<std::string, std::pair<Clock::time_point, base::Backoff>> retry;
  std::unique_lock lock(mutex_);
  while (!stop_) {
    Clock::time_point next = Clock::time_point::max();
    for (const auto& [topic, r] : retry) next = std::min(next, r.first);
    if (queue_.empty()) {
      if (next == Clock::time_point::max()) {
        wake_.wait(lock);
      } else {
        wake_.wait_until(lock, next);
      }
    }
    if (stop_) break;
    std::vector<std::string> todo(queue_.begin(), queue_.end());
    queue_.clear();
    const auto now = Clock::now();
    for (auto it = retry.begin(); it != retry.end(); ++it) {
      if (it->second.first <= now) todo.push_back(it->first);
    }
    lock.unlock();
    for (const auto& topic : todo) {
      try {
        admin.ensure_topics({topic}, options_.partitions, options_.replication);
        retry.erase(topic);
        spdlog::info("ready topic {} is in place", topic);
      } catch (const std::exception& e) {
        auto [it, inserted] = retry.try_emplace(topic, Clock::time_point{},
                                                base::Backoff(std::chrono::seconds(1), std::chrono::seconds(60)));
        const std::chrono::milliseconds wait = it->second.second.next();
        it->second.first = Clock::now() + wait;
        spdlog::warn("could not create ready topic {} ({}); trying again in {} ms", topic, e.what(), wait.count());
      }
    }
    lock.lock();
  }
}

}  // namespace delayd::broker
