#!/usr/bin/env python3
"""Every script the documentation names runs in CI, at least as a smoke.

    check_scripts.py <repository>

The names: every path of a script (`bench/...`, `scripts/...`, `examples/...`, `tests/...`,
`clients/...`; `.sh`, `.py`, `.mjs`) in README.md, CHANGELOG.md, docs/**/*.md, clients/*/README.md
and examples/*/README.md, and in what scripts/run.sh prints. What runs in CI: .ci/run, and every
script an add_test() of a CMakeLists.txt names, and, from those, every script that one of them
runs or sources (named in its code, not only in its comments), and so on. A named script that
none of them reaches fails the check, with where the documentation names it: give it a smoke test
(a ctest that runs it with tiny sizes), or have a tested script run it.

Python 3 standard library only; no tool, no stack. Prints each named script with the test that
reaches it.
"""
import os
import re
import sys

SCRIPT = r"(?:bench|scripts|examples|tests|clients)/[\w./-]+?\.(?:sh|py|mjs)"
SUFFIXES = (".sh", ".py", ".mjs")
SKIP_DIRS = {".git", ".cache", ".stack", "node_modules", "target", "__pycache__"}


def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def repo_files(root):
    out = []
    for top, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith("build")]
        for name in files:
            out.append(os.path.relpath(os.path.join(top, name), root))
    return out


def documentation(root, files):
    pages = ["README.md", "CHANGELOG.md"]
    pages += [f for f in files if f.startswith("docs/") and f.endswith(".md")]
    pages += [f for f in files if re.fullmatch(r"(clients|examples)/[^/]+/README\.md", f)]
    return [p for p in pages if os.path.isfile(os.path.join(root, p))]


def run_sh_output(root):
    """What scripts/run.sh prints: its here-document at the end."""
    text = read(os.path.join(root, "scripts/run.sh"))
    m = re.search(r"cat <<EOF\n(.*?)^EOF$", text, re.S | re.M)
    return m.group(1) if m else ""


def code_of(path, text):
    """The text of a script without its comment lines (and Python's docstrings)."""
    if path.endswith(".py"):
        text = re.sub(r'"""(.*?)"""', "", text, flags=re.S)
    lines = []
    for line in text.splitlines():
        if line.lstrip().startswith(("#", "//", "*", "/*")):
            continue
        lines.append(re.sub(r"\s#\s.*$", "", line))
    return "\n".join(lines)


def mentions(code, here, scripts):
    """The scripts `code` (of a file in directory `here`) runs or sources, by path or by name."""
    out = set()
    by_name = {}
    for s in scripts:
        by_name.setdefault(os.path.basename(s), []).append(s)
    for name, paths in by_name.items():
        for m in re.finditer(rf"(?<![\w.-])([\w$/{{}}().\"-]*/)?{re.escape(name)}(?![\w.-])", code):
            prefix = (m.group(1) or "").replace('"', "")
            chosen = [p for p in paths if prefix and prefix.rstrip("/").endswith(os.path.dirname(p))]
            if not chosen:
                chosen = [p for p in paths if os.path.dirname(p) == here] or (paths if len(paths) == 1 else [])
            out.update(chosen)
    return out


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = os.path.abspath(sys.argv[1])
    files = repo_files(root)
    scripts = sorted(f for f in files if f.endswith(SUFFIXES) and re.match(SCRIPT, f))

    # Named by the documentation, and where.
    named = {}
    for page in documentation(root, files):
        for m in re.finditer(SCRIPT, read(os.path.join(root, page))):
            named.setdefault(m.group(0), set()).add(page)
    for m in re.finditer(SCRIPT, run_sh_output(root)):
        named.setdefault(m.group(0), set()).add("scripts/run.sh's output")

    # The roots: .ci/run, and the scripts each add_test() names (the test's name kept).
    reached = {}  # script -> the test that reaches it
    frontier = []
    if os.path.isfile(os.path.join(root, ".ci/run")):
        for s in mentions(code_of(".ci/run", read(os.path.join(root, ".ci/run"))), ".ci", scripts):
            reached.setdefault(s, "CI (.ci/run)")
            frontier.append(s)
    for cm in sorted(f for f in files if os.path.basename(f) == "CMakeLists.txt"):
        text = "\n".join(line for line in read(os.path.join(root, cm)).splitlines() if not line.lstrip().startswith("#"))
        here = os.path.dirname(cm)
        # set(name value) of the file, for ${name} in a test's command
        variables = dict(re.findall(r"^\s*set\((\w+)\s+([^\s)]+)\)", text, re.M))
        for m in re.finditer(r"add_test\s*\(\s*NAME\s+(\S+)(.*?)\)\s*$", text, re.S | re.M):
            test, body = m.group(1), m.group(2)
            body = re.sub(r"\$\{(\w+)\}", lambda v: variables.get(v.group(1), v.group(0)), body)
            for s in mentions(body.replace("${CMAKE_CURRENT_SOURCE_DIR}", here), here, scripts):
                if s not in reached:
                    reached[s] = f"ctest {test}"
                    frontier.append(s)
    # What those run or source, transitively.
    while frontier:
        s = frontier.pop(0)
        for t in mentions(code_of(s, read(os.path.join(root, s))), os.path.dirname(s), scripts):
            if t not in reached:
                reached[t] = reached[s] + f" via {s}"
                frontier.append(t)

    bad = 0
    for path in sorted(named):
        if not os.path.isfile(os.path.join(root, path)):
            print(f"FAIL: {path}, named in {', '.join(sorted(named[path]))}, does not exist")
            bad += 1
        elif path in reached:
            print(f"ok: {path}: {reached[path]}")
        else:
            print(f"FAIL: {path}, named in {', '.join(sorted(named[path]))}, runs in no test "
                  f"(give it a smoke test in a CMakeLists.txt, or run it from a tested script)")
            bad += 1
    print(f"scripts: {len(named)} named by the documentation, {len(named) - bad} run in CI"
          + (f", {bad} not" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
