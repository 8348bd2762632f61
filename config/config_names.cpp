#include "config/config_names.hpp"

#include <algorithm>

namespace delayd::config {

namespace {

bool is_topic_char(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

}  // namespace

bool is_valid_topic_name(std::string_view name) noexcept {
  if (name.empty() || name.size() > 249) return false;
  if (name == "." || name == "..") return false;
  if (name.starts_with("__")) return false;
  for (char c : name) {
    if (!is_topic_char(c)) return false;
  }
  return true;
}

bool is_valid_group_instance_id(std::string_view id) noexcept {
  if (id.empty() || id.size() > 249 || id == "." || id == "..") return false;
  return std::all_of(id.begin(), id.end(), is_topic_char);
}

std::string render_ready_topic(std::string_view topic_template, std::string_view business) {
  if (business.starts_with(kTopicBusinessPrefix)) return std::string(business.substr(kTopicBusinessPrefix.size()));
  std::string out(topic_template);
  if (auto pos = out.find(kBusinessPlaceholder); pos != std::string::npos) {
    out.replace(pos, kBusinessPlaceholder.size(), business);
  }
  return out;
}

}  // namespace delayd::config
