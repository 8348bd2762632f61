// cron_next_tool: next_n on the command line, for tests/cron/croniter_diff.py. Reads lines
//
//     <expression> TAB <zone> TAB <epoch ms> TAB <count>
//
// from stdin and answers each with one line on stdout, in order:
//
//     ok <epoch ms> <epoch ms> ...     the next <count> instants (fewer if the schedule ends)
//     error <message>                  the expression is invalid (parse_cron's message)
//     badzone <zone>                   no such zone in the system tz database ("UTC" is UTC)
//     badline                          not four fields, or a number that is not one
//
// Epoch milliseconds are the only raw integers here, at the tool's I/O; inside they are
// cron::Instant. Exit status 0 unless stdin or stdout fails.
#include <charconv>
#include <cstdint>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "cron/cron_expr.hpp"

namespace {

std::vector<std::string_view> split_tabs(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t pos = 0;
  while (true) {
    const std::size_t tab = line.find('\t', pos);
    out.push_back(line.substr(pos, tab == std::string_view::npos ? line.npos : tab - pos));
    if (tab == std::string_view::npos) return out;
    pos = tab + 1;
  }
}

template <typename Int>
bool parse_int(std::string_view text, Int& out) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc{} && end == text.data() + text.size();
}

std::string answer(std::string_view line) {
  using namespace delayd::cron;
  const std::vector<std::string_view> fields = split_tabs(line);
  std::int64_t ms = 0;
  std::size_t count = 0;
  if (fields.size() != 4 || !parse_int(fields[2], ms) || !parse_int(fields[3], count)) return "badline";
  const ParsedCron parsed = parse_cron(fields[0]);
  if (!parsed) return "error " + parsed.error;
  const date::time_zone* zone = nullptr;
  if (fields[1] != "UTC") {
    zone = find_zone(fields[1]);
    if (zone == nullptr) return "badzone " + std::string(fields[1]);
  }
  std::string out = "ok";
  for (Instant t : next_n(*parsed.expr, Instant{std::chrono::milliseconds{ms}}, zone, count)) {
    out += ' ';
    out += std::to_string(t.time_since_epoch().count());
  }
  return out;
}

}  // namespace

int main() {
  std::ios::sync_with_stdio(false);
  std::string line;
  while (std::getline(std::cin, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::cout << answer(line) << '\n';
  }
  std::cout.flush();
  return std::cin.bad() || !std::cout ? 1 : 0;
}
