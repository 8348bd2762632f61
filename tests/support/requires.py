"""The rule of tests/support/requires.hpp for Python tests: a missing tool never passes.

Under CI=true it fails the test (exit status 1); elsewhere the test prints "SKIPPED: <why>" and
exits 77, which ctest reports as skipped (the test is registered with SKIP_RETURN_CODE 77).
"""
import os

SKIP_EXIT = 77


def under_ci():
    return os.environ.get("CI") in ("true", "1")


def missing_tool(why):
    """The exit status of a test that cannot run for want of a tool, after saying why."""
    if under_ci():
        print(f"FAIL: {why}; under CI=true every tool must be installed")
        return 1
    print(f"SKIPPED: {why}")
    return SKIP_EXIT
