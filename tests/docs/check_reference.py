#!/usr/bin/env python3
"""The generated reference pages are current: each equals what delayd prints for it now.

    check_reference.py <delayd executable> <docs directory>

docs/reference/configuration.md is `delayd --print-reference config` (the settings table,
config/config_registry.cpp) and docs/reference/metrics.md is `delayd --print-reference metrics`
(the metric table, admin/metric_catalog.cpp). A page that differs (a setting or a metric added,
renamed, given another default or meaning, without regenerating) fails the test, which prints the
difference and the commands that regenerate the pages. Exit status 0 when all are current, 1
naming each stale page, 2 when it cannot run.
"""
import difflib
import os
import subprocess
import sys

PAGES = {"config": "configuration.md", "metrics": "metrics.md"}


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    delayd, docs = sys.argv[1:]
    env = {k: v for k, v in os.environ.items() if not k.startswith("DELAYD_")}
    stale = []
    for what, page in PAGES.items():
        path = os.path.join(docs, "reference", page)
        try:
            want = subprocess.run([delayd, "--print-reference", what], env=env, capture_output=True, text=True,
                                  timeout=30, check=True).stdout
        except (OSError, subprocess.SubprocessError) as e:
            print(f"cannot run {delayd} --print-reference {what}: {e}", file=sys.stderr)
            return 2
        have = open(path, encoding="utf-8").read() if os.path.exists(path) else ""
        if have == want:
            print(f"reference: docs/reference/{page} is current ({len(want.splitlines())} lines)")
            continue
        stale.append((what, page))
        sys.stdout.writelines(difflib.unified_diff(have.splitlines(True), want.splitlines(True),
                                                   f"docs/reference/{page} (committed)",
                                                   f"delayd --print-reference {what} (now)"))
    if stale:
        print("FAIL: the generated reference is stale; from the repository's top directory, regenerate it with")
        for what, page in stale:
            print(f"  build/apps/delayd --print-reference {what} > docs/reference/{page}")
        print("(build/ being your build directory) and commit the result.")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
