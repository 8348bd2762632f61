# Read by ctest after the discovered Catch tests (TEST_INCLUDE_FILES, tests/e2e/CMakeLists.txt):
# the e2e cases that must have the stack or the machine to themselves when ctest runs tests side
# by side (scripts/test.sh runs the stack tests two at a time).
#   the Redis outage case: CLIENT PAUSE ALL stops every client of the stack's Redis for 3 s, so a
#   test beside it would wait through an outage it did not ask for.
#   the max-lateness case: delayd checks max-lateness-ms when it takes a job for delivery, and the
#   ready record's timestamp is set when the shard's producer takes the record, later by that
#   producer's queue (docs/producing.md, "Catch-up after an outage"). The test reads the bound
#   (400 ms) off the timestamps, so a test beside it, stretching the queue on two cores, made it
#   fail by 4 ms once.
set_tests_properties([==[e2e.a Redis outage delays jobs but loses none]==]
                     [==[e2e.max-lateness-ms expires a job delayd reaches too late, and skips a repeat's late occurrences]==]
                     PROPERTIES RUN_SERIAL TRUE)
