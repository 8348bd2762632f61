"""The shape of the Python end-to-end tests: checks that are counted rather than stopping the test
(so one run shows every failure), and waits for a condition while the delayd under test runs.

    checks = Checks()
    checks.check(ok, "what was expected")      prints "ok   ..." or "FAIL ...", and remembers a failure
    checks.failures                            what failed, in order
    wait_for("what", cond, seconds, proc)      cond()'s first true value; AssertionError when the
                                               time is up or `proc` (a Popen) has exited
"""
import time


class Checks:
    def __init__(self):
        self.failures = []

    def check(self, ok, what):
        print(("ok   " if ok else "FAIL ") + what, flush=True)
        if not ok:
            self.failures.append(what)
        return ok


def wait_for(what, cond, seconds, proc=None, poll=0.1):
    deadline = time.time() + seconds
    while time.time() < deadline:
        got = cond()
        if got:
            return got
        if proc is not None and proc.poll() is not None:
            raise AssertionError("delayd exited")
        time.sleep(poll)
    raise AssertionError("timed out waiting for " + what)
