// contract/ingest_parse.cpp also holds ingest_rules(const Config&), which calls into config.cpp.
// The fuzz target never calls it, and config.cpp is not built here: it pulls in CLI11, toml11
// and config_registry.cpp, which clang 14 does not compile. These stand-ins satisfy the linker
// and stop the run should they ever be reached. A new undefined reference from ingest_parse.cpp
// either gets a stand-in here (if only ingest_rules uses it) or its source in CMakeLists.txt.
#include <cstdio>
#include <cstdlib>

#include "config/config.hpp"

namespace delayd::config {

namespace {
[[noreturn]] void not_here(const char* what) {
  std::fprintf(stderr, "fuzz: %s is a stand-in (tests/fuzz/config_stand_ins.cpp)\n", what);
  std::abort();
}
}  // namespace

std::vector<std::string> split_business_list(std::string_view) { not_here("split_business_list"); }
std::size_t max_ready_record_bytes(const Config&) { not_here("max_ready_record_bytes"); }
std::vector<IngestTopic> ingest_topics(const Config&) { not_here("ingest_topics"); }

}  // namespace delayd::config
