#include "broker/version_interlock.hpp"

#include "connectors/rdkafka_config.hpp"
#include "delayd/build_info.hpp"

namespace delayd::broker {

namespace {

std::string mark() { return "delayd-" + std::string(build::kVersion) + "-layout" + std::to_string(kLayout); }

}  // namespace

std::string client_id(const std::optional<std::string>& users) {
  return users && !users->empty() ? mark() + "-" + *users : mark();
}

connectors::Properties with_client_id(connectors::Properties props) {
  const std::optional<std::string> users = connectors::find_property(props, "client.id");
  props.emplace_back("client.id", client_id(users));
  return props;
}

bool same_layout(std::string_view id) {
  if (!id.starts_with("delayd-")) return false;
  const std::string layout = "-layout" + std::to_string(kLayout);
  const auto at = id.find(layout);
  if (at == std::string_view::npos) return false;
  const auto end = at + layout.size();
  return end == id.size() || id[end] == '-';  // not "-layout21"
}

std::vector<std::string> strangers(connectors::KafkaAdmin& admin, const std::vector<std::string>& groups,
                                   int timeout_ms) {
  std::vector<std::string> out;
  for (const auto& group : groups) {
    for (const auto& m : admin.group_members(group, timeout_ms)) {
      if (same_layout(m.client_id)) continue;
      out.push_back("client id " + (m.client_id.empty() ? std::string("(none)") : m.client_id) + " on " + m.host +
                    " in group " + group);
    }
  }
  return out;
}

std::string layout_refusal(const storage::JobStore::Layout& found, const std::string& prefix) {
  return "refusing to start: Redis prefix '" + prefix + "' holds delayd's layout " + std::to_string(found.layout) +
         (found.version.empty() ? "" : ", written by delayd " + found.version) + "; this delayd " +
         std::string(build::kVersion) + " reads layouts up to " + std::to_string(kLayout) +
         ". Run a delayd of that version or later here (docs/upgrading.md).";
}

std::string members_refusal(const std::vector<std::string>& strangers) {
  std::string who;
  for (const auto& s : strangers) who += (who.empty() ? "" : "; ") + s;
  return "refusing to start: another version of delayd is running in this instance's consumer groups (" + who +
         "; a delayd before 0.4 sets no client id of its own). Two layouts in one group lose entries: stop every "
         "instance of the other version first, then start this one (docs/upgrading.md).";
}

}  // namespace delayd::broker
