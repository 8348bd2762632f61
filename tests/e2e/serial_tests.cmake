# Read by ctest after the discovered Catch tests (TEST_INCLUDE_FILES, tests/e2e/CMakeLists.txt):
# the e2e cases that must have the stack to themselves when ctest runs tests side by side
# (scripts/test.sh runs the plain pass's stack tests two at a time).
#   the Redis outage case: CLIENT PAUSE ALL stops every client of the stack's Redis for 3 s, so a
#   test beside it would wait through an outage it did not ask for.
set_tests_properties([==[e2e.a Redis outage delays jobs but loses none]==] PROPERTIES RUN_SERIAL TRUE)
