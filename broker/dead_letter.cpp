#include "broker/dead_letter.hpp"

#include <algorithm>
#include <array>
#include <string>

#include "contract/ingest_parse.hpp"

namespace delayd::broker {

namespace {

bool is_kept_header(const std::string& name) {
  constexpr std::array<std::string_view, 9> kKept = {
      contract::kHeaderError,           contract::kHeaderReason,       contract::kHeaderSourceTopic,
      contract::kHeaderSourcePartition, contract::kHeaderSourceOffset, contract::kHeaderJobId,
      contract::kHeaderBusiness,        contract::kHeaderRedriveCount, kHeaderValueBytes};
  return std::find(kKept.begin(), kKept.end(), name) != kKept.end();
}

}  // namespace

bool shrink_dead_letter(connectors::OutRecord& rec) {
  if (rec.value) {
    rec.headers.push_back({std::string(kHeaderValueBytes), std::to_string(rec.value->size())});
    rec.value.reset();
    return true;
  }
  const bool has_extra = rec.key.has_value() || std::any_of(rec.headers.begin(), rec.headers.end(), [](const auto& h) {
                           return !is_kept_header(h.name) || (h.value && h.value->size() > 1000);
                         });
  if (!has_extra) return false;
  rec.key.reset();
  std::erase_if(rec.headers, [](const auto& h) { return !is_kept_header(h.name); });
  for (auto& h : rec.headers) {
    if (h.value && h.value->size() > 1000) h.value->resize(1000);
  }
  return true;
}

}  // namespace delayd::broker
