# The build's identity, for `delayd --version`, `delayctl --version` and delayd_build_info on
# /metrics: the project version (project() in the top CMakeLists.txt, its one home), the git commit
# the tree was configured at, or -DDELAYD_REVISION=<commit> where there is no git tree (an image
# built without .git), else "unknown", and the build type (CMAKE_BUILD_TYPE, "none" if unset). The
# header is rewritten only when one of them changes, so a reconfigure at the same commit rebuilds
# nothing. The revision is read at configure time, and a commit or a checkout makes the next build
# configure again (the git directory's HEAD and its log are configure dependencies), so that an
# incremental build never names the commit of an earlier configure.
set(DELAYD_REVISION "" CACHE STRING "the revision delayd_build_info shows; empty: git rev-parse --short HEAD")
set(revision "${DELAYD_REVISION}")
if(NOT revision)
  set(revision "unknown")
  find_package(Git QUIET)
  if(GIT_FOUND)
    execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --short HEAD
      WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
      OUTPUT_VARIABLE git_revision OUTPUT_STRIP_TRAILING_WHITESPACE
      RESULT_VARIABLE git_status ERROR_QUIET)
    if(git_status EQUAL 0 AND git_revision)
      set(revision "${git_revision}")
      execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --absolute-git-dir
        WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
        OUTPUT_VARIABLE git_dir OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
      foreach(moved "${git_dir}/HEAD" "${git_dir}/logs/HEAD")
        if(git_dir AND EXISTS "${moved}")
          set_property(DIRECTORY ${PROJECT_SOURCE_DIR} APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${moved}")
        endif()
      endforeach()
    endif()
  endif()
endif()
set(DELAYD_BUILD_INFO_REVISION "${revision}")
set(DELAYD_BUILD_INFO_TYPE "${CMAKE_BUILD_TYPE}")
if(NOT DELAYD_BUILD_INFO_TYPE)
  set(DELAYD_BUILD_INFO_TYPE "none")
endif()
set(DELAYD_BUILD_INFO_DIR ${PROJECT_BINARY_DIR}/generated/build)
configure_file(${CMAKE_CURRENT_LIST_DIR}/build_info.hpp.in ${DELAYD_BUILD_INFO_DIR}/delayd/build_info.hpp @ONLY)
