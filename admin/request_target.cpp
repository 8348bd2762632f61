#include "admin/request_target.hpp"

namespace delayd::admin {

namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string_view target_path(std::string_view target) { return target.substr(0, target.find('?')); }

std::optional<std::string> job_id_of(std::string_view path) {
  if (!path.starts_with(kJobsPrefix)) return std::nullopt;
  const std::string_view rest = path.substr(kJobsPrefix.size());
  if (rest.empty() || rest.find('/') != std::string_view::npos) return std::nullopt;
  std::string out;
  out.reserve(rest.size());
  for (std::size_t i = 0; i < rest.size(); ++i) {
    if (rest[i] != '%') {
      out.push_back(rest[i]);
      continue;
    }
    if (i + 2 >= rest.size()) return std::nullopt;
    const int hi = hex_digit(rest[i + 1]);
    const int lo = hex_digit(rest[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return out;
}

}  // namespace delayd::admin
