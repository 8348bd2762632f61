#include "fleet.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <thread>

namespace delayd::chaos {

std::map<std::string, std::vector<int>> Spread::by_topic() const {
  std::map<std::string, std::vector<int>> out;
  for (const auto& [slot, topics] : by_slot) {
    for (const auto& [topic, n] : topics) out[topic];  // every topic any instance reads
  }
  for (const auto& [slot, topics] : by_slot) {
    for (auto& [topic, counts] : out) {
      const auto it = topics.find(topic);
      counts.push_back(it == topics.end() ? 0 : it->second);
    }
  }
  return out;
}

std::string Spread::text(const std::map<std::string, std::string>& names) const {
  std::string out;
  for (const auto& [topic, counts] : by_topic()) {
    const auto name = names.find(topic);
    out += (out.empty() ? "" : ", ") + (name == names.end() ? topic : name->second) + " ";
    for (std::size_t i = 0; i < counts.size(); ++i) out += (i ? "/" : "") + std::to_string(counts[i]);
  }
  return out.empty() ? "none" : out;
}

bool Spread::even(const std::map<std::string, int>& partitions) const {
  if (by_slot.empty()) return false;
  const auto topics = by_topic();
  for (const auto& [topic, total] : partitions) {
    const auto it = topics.find(topic);
    if (it == topics.end()) return false;
    const auto& counts = it->second;
    int sum = 0;
    for (int n : counts) sum += n;
    const auto [lo, hi] = std::minmax_element(counts.begin(), counts.end());
    if (sum != total || *hi - *lo > 1) return false;
  }
  return true;
}

bool Fleet::launch(std::size_t i, const std::string& until) {
  while (members_.size() <= i) members_.push_back(nullptr);
  while (admin_ports_.size() <= i) admin_ports_.push_back(0);
  if (admin_ports_[i] == 0) admin_ports_[i] = e2e::free_port();
  members_[i] = std::make_unique<DelaydProcess>(world_);
  members_[i]->set_env("DELAYD_ADMIN_LISTEN", "127.0.0.1:" + std::to_string(admin_ports_[i]));
  if (const auto env = envs_.find(i); env != envs_.end()) {
    for (const auto& [name, value] : env->second) members_[i]->set_env(name, value);
  }
  if (const auto user = users_.find(i); user != users_.end())
    members_[i]->run_as(user->second.first, user->second.second);
  if (const auto apart = log_suffixes_.find(i); apart != log_suffixes_.end())
    members_[i]->set_log_path(world_.log_path + apart->second);
  if (until.empty()) return start_delayd(*members_[i]);
  members_[i]->set_die_with_test(true);
  try {
    members_[i]->start_until(until, std::chrono::seconds(30));
    return true;
  } catch (...) {  // start_until() has recorded the failure with the log
    return false;
  }
}

bool Fleet::start(std::size_t i) { return launch(i, ""); }

bool Fleet::start_member(std::size_t i) { return launch(i, "delayd running"); }

std::size_t Fleet::running(std::vector<std::string>* died) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < members_.size(); ++i) {
    if (!members_[i]) continue;
    if (members_[i]->running()) {
      ++n;
    } else if (died && members_[i]->exit_status()) {
      died->push_back("instance " + std::to_string(i) + " exited " + std::to_string(*members_[i]->exit_status()));
    }
  }
  return n;
}

void Fleet::stop_all() {
  for (auto& m : members_) {
    if (m && m->running()) m->stop();
  }
}

Spread Fleet::spread() {
  Spread s;
  for (std::size_t i = 0; i < members_.size(); ++i) {
    if (!members_[i] || !members_[i]->running()) continue;
    auto& mine = s.by_slot[i];
    const std::string response = e2e::http_get(admin_ports_[i], "/stats");
    const auto body = response.find("\r\n\r\n");
    if (body == std::string::npos) continue;
    const auto j = nlohmann::json::parse(response.substr(body + 4), nullptr, false);
    if (j.is_discarded() || !j.contains("partitions") || !j["partitions"].is_object()) continue;
    for (const auto& [topic, n] : j["partitions"].items()) mine[topic] = n.get<int>();
  }
  return s;
}

Spread Fleet::wait_even(const std::map<std::string, int>& partitions, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  Spread s = spread();
  while (!s.even(partitions) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    s = spread();
  }
  return s;
}

}  // namespace delayd::chaos
