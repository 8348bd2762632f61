# The build's identity, for delayd_build_info on /metrics: the project version (project() in the
# top CMakeLists.txt, its one home) and the git commit the tree was configured at ("unknown" outside
# a git tree, e.g. a source tarball). The header is rewritten only when either changes, so a
# reconfigure at the same commit rebuilds nothing. The revision is read at configure time.
find_package(Git QUIET)
set(DELAYD_REVISION "unknown")
if(GIT_FOUND)
  execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --short HEAD
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
    OUTPUT_VARIABLE revision OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE revision_status ERROR_QUIET)
  if(revision_status EQUAL 0 AND revision)
    set(DELAYD_REVISION "${revision}")
  endif()
endif()
set(DELAYD_BUILD_INFO_DIR ${PROJECT_BINARY_DIR}/generated/build)
configure_file(${CMAKE_CURRENT_LIST_DIR}/build_info.hpp.in ${DELAYD_BUILD_INFO_DIR}/delayd/build_info.hpp @ONLY)
