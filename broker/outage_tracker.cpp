#include "broker/outage_tracker.hpp"

namespace delayd::broker {

std::int64_t OutageTracker::failed(Failure what, const std::string& reason) {
  switch (what) {
    case Failure::redis:
      redis_.failed(reason);
      break;
    case Failure::kafka:
      kafka_.failed(reason);
      break;
    case Failure::other:
      other_.failed(reason);
      break;
  }
  return backoff_.next().count();
}

void OutageTracker::turn_done(const std::optional<std::string>& delivery_outage) {
  redis_.recovered();
  kafka_.recovered();
  other_.recovered();
  backoff_.reset();
  if (delivery_outage) {
    delivery_.failed(*delivery_outage);  // the loop goes on: jobs wait, nothing is lost
  } else {
    delivery_.recovered();
  }
}

void OutageTracker::refusal(const std::optional<std::string>& refused) {
  if (refused) {
    access_.failed(*refused);
  } else {
    access_.recovered();
  }
}

void OutageTracker::not_joined(const std::optional<std::string>& why) {
  if (why) {
    group_.failed(*why);
  } else {
    group_.recovered();
  }
}

std::map<std::string, bool> OutageTracker::outages() const {
  std::map<std::string, bool> out;
  for (const Outage* o : {&redis_, &kafka_, &access_, &group_, &other_, &delivery_}) out[o->dependency()] = o->active();
  return out;
}

std::string OutageTracker::problem(bool ingest_paused) const {
  for (const Outage* o : {&redis_, &kafka_, &access_, &group_, &other_, &delivery_}) {
    if (o->active()) return o->problem();
  }
  if (ingest_paused) return "ingest paused: Kafka is not acknowledging records fast enough";
  return {};
}

}  // namespace delayd::broker
