// Which malloc the process runs on, as the process itself finds it: delayd links jemalloc
// (DELAYD_JEMALLOC in the top CMakeLists.txt says why), a sanitizer build cannot, and an image
// may preload another. `delayd --version` prints it, so that a build that lost it shows.
//
// Threading: any thread.
#pragma once

#include <dlfcn.h>

#include <cstddef>
#include <string>

namespace delayd::base {

// "jemalloc <version>" when the malloc in use is jemalloc (its mallctl() is found in the
// process and answers "version"), else "system malloc" (glibc's, or a sanitizer's in its place).
inline std::string allocator_name() {
  using Mallctl = int (*)(const char*, void*, std::size_t*, void*, std::size_t);
  auto* mallctl = reinterpret_cast<Mallctl>(::dlsym(RTLD_DEFAULT, "mallctl"));
  if (mallctl == nullptr) return "system malloc";
  const char* version = nullptr;
  std::size_t size = sizeof(version);
  if (mallctl("version", static_cast<void*>(&version), &size, nullptr, 0) != 0 || version == nullptr) {
    return "jemalloc";
  }
  return std::string("jemalloc ") + version;
}

}  // namespace delayd::base
