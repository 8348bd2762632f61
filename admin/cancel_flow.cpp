#include "admin/cancel_flow.hpp"

#include <thread>

namespace delayd::admin {

CancelOutcome cancel_and_wait(const std::function<std::string()>& state_of, const std::function<void()>& publish,
                              std::chrono::milliseconds wait) {
  const std::string before = state_of();
  if (before == "missing") return {CancelVerdict::no_job, before};
  if (before != "delay") return {CancelVerdict::not_waiting, before};
  publish();
  const auto deadline = std::chrono::steady_clock::now() + wait;
  std::string now = state_of();
  while (now == "delay" && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    now = state_of();
  }
  if (now == "delay") return {CancelVerdict::pending, now};
  return {now == "cancelled" ? CancelVerdict::cancelled : CancelVerdict::not_cancelled, now};
}

}  // namespace delayd::admin
