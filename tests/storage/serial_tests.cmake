# Read by ctest after the discovered Catch tests (TEST_INCLUDE_FILES, tests/storage/CMakeLists.txt):
# the storage cases that must have the stack's Redis to themselves when ctest runs tests side by
# side (scripts/test.sh runs the plain pass's stack tests two at a time).
#   SCRIPT FLUSH and FUNCTION DELETE drop every client's scripts and library: a post of another
#   test beside it would meet NOSCRIPT or "Function not found", which a posted call reports as an
#   I/O error for its caller to post again.
#   The prune deletes every library of another build: an older delayd run beside it by another
#   test would meet "Function not found" (and load its library again).
set_tests_properties([==[storage.scripts flushed from Redis are loaded again transparently]==]
                     [==[storage.the libraries of other builds are listed and pruned, this build's and others' stay]==]
                     [==[storage.posted accepts do what accept() does, in the order they were posted]==]
                     PROPERTIES RUN_SERIAL TRUE)
