#!/usr/bin/env python3
"""Runs the documentation's command blocks against a real delayd on the local stack.

    run_blocks.py <delayd> <delayctl> <README.md | page.md>...

Which blocks run: in README.md, every ```sh block of the tour (between the markers
`--8<-- [start:tour]` and `--8<-- [end:tour]`); in any other page, every block whose fence says
`sh {.run}` (the class `run`; MkDocs shows it as a plain sh block). A page's blocks run in
order in one bash (set -euo pipefail), after the tour's, so a later block sees the variables an
earlier one set. A command line ending in `# → TEXT` must print TEXT (a fixed string); every
other line must merely succeed. A block written as a transcript (`$ command` lines, each
followed by what it prints) must print each of those lines.

The commands are the documentation's, run as a reader runs them from the repository's top
directory after `scripts/run.sh`, with three differences that keep a run apart from any other on
the same stack: the working directory is a scratch copy of that top directory in which
`scripts/stack.sh env` prints the test's own KAFKA_BOOTSTRAP and REDIS_URL, and
`build-release/apps/delayctl` is the delayctl under test (also on PATH, as `delayctl`); delayd is
started here, with the admin endpoint on a free port (DELAYD_ADMIN_LISTEN, which the tour reads);
and the names the pages choose (the topics `delay-ingest` and `delay-status`, the businesses
`demo` and `mail`, job ids `hello-1` ...) get this run's suffix, in the commands and in the
expected output alike.

Needs KAFKA_BOOTSTRAP and REDIS_URL (scripts/stack.sh env), and kcat, redis-cli and curl: a
missing tool skips the test (exit 77), or fails it under CI=true (tests/support/requires.py).
"""
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from checks import free_port  # noqa: E402
from requires import missing_tool  # noqa: E402

TOOLS = ("kcat", "redis-cli", "curl")
EXPECT = re.compile(r"\s+# → (.+?)\s*$")
# Names the pages use that each run makes its own (whole words only).
RENAMED = ("delay-ingest", "delay-status", "demo", "mail", "orders", "hello-1", "hello-2", "order-42",
           "digest-daily", "report-daily")


def blocks(path):
    """The command blocks of one page that run, each as a list of lines."""
    text = open(path, encoding="utf-8").read()
    readme = os.path.basename(path) == "README.md"
    if readme:
        start, end = text.find("--8<-- [start:tour]"), text.find("--8<-- [end:tour]")
        if start < 0 or end < start:
            raise SystemExit(f"{path}: no tour markers")
        text = text[start:end]
    out = []
    for m in re.finditer(r"^```([^\n]*)\n(.*?)^```\s*$", text, re.S | re.M):
        info = m.group(1).strip()
        if (readme and info == "sh") or re.fullmatch(r"sh \{[^}]*\.run\b[^}]*\}", info):
            out.append(m.group(2).splitlines())
    return out


def logical_lines(lines):
    """Lines joined across trailing backslashes."""
    out, pending = [], ""
    for line in lines:
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        out.append(pending + line)
        pending = ""
    if pending:
        out.append(pending)
    return out


def commands_of(block):
    """[(command, [expected texts])] of one block: `# → TEXT` lines, or a transcript."""
    lines = logical_lines(block)
    if not any(line.startswith("$ ") for line in lines):
        out = []
        for line in lines:
            m = EXPECT.search(line)
            out.append((line[:m.start()], [m.group(1)]) if m else (line, []))
        return out
    out = []
    for line in lines:
        if line.startswith("$ "):
            out.append((line[2:], []))
        elif line.strip() and out:
            out[-1][1].append(line.strip())
    return out


def script_of(pages, suffix):
    """One bash script: every runnable block of every page, in order, each expectation checked."""
    lines = ["set -euo pipefail"]
    count = 0
    for page in pages:
        for number, block in enumerate(blocks(page), 1):
            count += 1
            where = f"{os.path.basename(page)} block {number}"
            for command, wants in commands_of(block):
                for name in RENAMED:
                    command = re.sub(rf"(?<![\w-]){re.escape(name)}(?![\w-])", name + suffix, command)
                    wants = [re.sub(rf"(?<![\w-]){re.escape(name)}(?![\w-])", name + suffix, w) for w in wants]
                if not command.strip():
                    continue
                lines.append(f"printf '%s\\n' {shlex.quote('$ ' + command)}")
                if not wants:
                    lines.append(command)
                    continue
                lines.append(f"out=$({command})")
                lines.append("printf '%s\\n' \"$out\"")
                for want in wants:
                    fail = shlex.quote(f"FAIL: {where}: expected {want!r} from: {command.strip()}")
                    lines.append(f"grep -qF -- {shlex.quote(want)} <<<\"$out\" || {{ echo {fail}; exit 1; }}")
    return "\n".join(lines) + "\n", count


def wait_ready(admin, proc, log, deadline_s=60):
    """Until delayd's /readyz answers 200 (it has its partitions and its servers)."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return f"delayd exited with status {proc.returncode}"
        try:
            with urllib.request.urlopen(f"http://{admin}/readyz", timeout=1) as r:
                if r.status == 200:
                    return None
        except OSError:
            pass
        time.sleep(0.1)
    return f"delayd was not ready within {deadline_s} s"


def main():
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    delayd, delayctl, pages = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]), sys.argv[3:]
    for tool in TOOLS:
        if not shutil.which(tool):
            return missing_tool(f"{tool} not found (scripts/install-deps.sh installs it)")
    bootstrap, redis_url = os.environ.get("KAFKA_BOOTSTRAP"), os.environ.get("REDIS_URL")
    if not bootstrap or not redis_url:
        print("FAIL: KAFKA_BOOTSTRAP and REDIS_URL must be set (scripts/stack.sh up; scripts/stack.sh env)")
        return 1
    suffix = f"-{os.getpid()}-{time.time_ns()}"
    script, count = script_of(pages, suffix)
    if count == 0:
        print(f"FAIL: no runnable block in {' '.join(pages)}")
        return 1
    admin = f"127.0.0.1:{free_port()}"
    with tempfile.TemporaryDirectory(prefix="delayd-docs-") as top:
        os.makedirs(os.path.join(top, "scripts"))
        os.makedirs(os.path.join(top, "build-release", "apps"))
        os.symlink(delayctl, os.path.join(top, "build-release", "apps", "delayctl"))
        stack = os.path.join(top, "scripts", "stack.sh")
        with open(stack, "w") as f:
            f.write("#!/usr/bin/env bash\n# The test's stack, as scripts/stack.sh env prints it.\n"
                    f"[[ \"$1\" == env ]] || exit 2\nprintf 'KAFKA_BOOTSTRAP=%s\\nREDIS_URL=%s\\n' "
                    f"{shlex.quote(bootstrap)} {shlex.quote(redis_url)}\n")
        os.chmod(stack, 0o755)
        env = {k: v for k, v in os.environ.items() if not k.startswith("DELAYD_")}
        env.update(DELAYD_KAFKA_BOOTSTRAP=bootstrap, DELAYD_REDIS_URL=redis_url, DELAYD_ADMIN_LISTEN=admin,
                   DELAYD_KAFKA_INGEST_TOPIC="delay-ingest" + suffix, DELAYD_KAFKA_STATUS_TOPIC="delay-status" + suffix,
                   DELAYD_KAFKA_GROUP_ID="docs" + suffix)
        env["PATH"] = os.path.join(top, "build-release", "apps") + os.pathsep + env.get("PATH", "")
        log_path = os.path.join(top, "delayd.log")
        started = time.monotonic()
        with open(log_path, "w") as log:
            proc = subprocess.Popen([delayd], env=env, stdout=log, stderr=subprocess.STDOUT, cwd=top)
        try:
            problem = wait_ready(admin, proc, log_path)
            if problem:
                print(open(log_path).read())
                print(f"FAIL: {problem}")
                return 1
            ready = time.monotonic()
            # The commands see delayd's settings as a reader's shell would after scripts/run.sh
            # (delayctl reads the same DELAYD_* variables as delayd).
            run = subprocess.run(["bash", "-c", script], env=env, cwd=top, timeout=120)
            print(f"docs blocks: {count} blocks of {', '.join(os.path.basename(p) for p in pages)} ran in "
                  f"{time.monotonic() - ready:.1f} s (delayd ready after {ready - started:.1f} s)")
            if run.returncode != 0:
                print(open(log_path).read()[-4000:])
                print(f"FAIL: a command exited with status {run.returncode}")
                return 1
            return 0
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


if __name__ == "__main__":
    sys.exit(main())
