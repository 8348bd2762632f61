#!/usr/bin/env python3
"""The documentation's settings tables say what `delayd --print-config` says.

    check_docs_config.py <delayd executable> <docs directory> <config/config_registry.cpp>

The settings table (config/config_registry.cpp) is the one home of every setting's name and
default; `delayd --print-config` with no file, no DELAYD_* variable and no flag prints exactly
those defaults. This check reads every table row of the documentation's pages (docs/**/*.md) whose first cell names settings
(`section.key`, or `a` / `b` shorthands after a full name) and asserts:
  - every setting delayd prints is documented in the Configuration page's table
    (docs/operating/configuration.md);
  - every setting the pages name exists;
  - every default the pages state equals delayd's (`empty (...)` is the empty string, a value
    followed by a note in parentheses is the value);
  - every range the pages state ("lo..hi: ..." at the start of a row's meaning, for a row naming one
    setting) equals the bounds of that setting's row in the settings table.
Exit status 0 when all agree, 1 naming each difference, 2 when it cannot run.
"""
import os
import re
import subprocess
import sys
import tomllib

TABLES = {"properties", "consumer_properties", "producer_properties", "business"}


def flatten(table, prefix=""):
    """{'kafka': {'bootstrap': 'x'}} -> {'kafka.bootstrap': 'x'}; passthrough tables are left out."""
    out = {}
    for key, value in table.items():
        name = prefix + key
        if isinstance(value, dict):
            if key not in TABLES:
                out.update(flatten(value, name + "."))
        elif isinstance(value, bool):
            out[name] = "true" if value else "false"
        else:
            out[name] = str(value)
    return out


def printed_defaults(delayd):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DELAYD_")}
    text = subprocess.run([delayd, "--print-config"], env=env, capture_output=True, text=True, timeout=30,
                          check=True).stdout
    settings = flatten(tomllib.loads(text))
    # A setting with no default is printed as a comment ("# db is not set: ...").
    section = ""
    for line in text.splitlines():
        m = re.match(r"^\[([\w.]+)\]$", line)
        if m:
            section = m.group(1)
        m = re.match(r"^# (\w+) is not set", line)
        if m:
            settings[f"{section}.{m.group(1)}"] = None
    return settings


def table_ranges(path):
    """{'kafka.topic_partitions': ('1', '100000'), ...}: the bounds of every integer row of the
    settings table (config_registry.cpp), with its named constants resolved (those of the table's
    own file and those config.hpp, beside it, declares for other modules to use)."""
    text = open(path, encoding="utf-8").read()
    header = open(os.path.join(os.path.dirname(path), "config.hpp"), encoding="utf-8").read()
    consts = {m.group(1): m.group(2).replace("'", "")
              for m in re.finditer(r"constexpr (?:Int|std::int64_t) (k\w+) = ([\d']+);", text + header)}
    ranges = {}
    for m in re.finditer(r'Setting\{"([\w.]+)", field<Int>\(.*?\),\s*([\w\']+),\s*([\w\']+)', text):
        lo, hi = (consts.get(v, v.replace("'", "")) for v in (m.group(2), m.group(3)))
        ranges[m.group(1)] = (lo, hi)
    return ranges


def cells(row):
    return [c.strip() for c in row.strip().strip("|").split("|")]


def names_of(cell):
    """'`scheduler.ingest_batch` / `load_batch`' -> ['scheduler.ingest_batch', 'scheduler.load_batch']."""
    names = re.findall(r"`([\w.]+)`", cell)
    if not names or "." not in names[0]:
        return []
    section = names[0].rsplit(".", 1)[0]
    return [n if "." in n else f"{section}.{n}" for n in names]


def defaults_of(cell, count):
    """The defaults a cell states, one per name, or None where it states none."""
    if cell == "":
        return [None] * count
    if cell.startswith("empty"):
        return [""] * count
    values = re.findall(r"`([^`]*)`", cell)
    if len(values) == count:
        return values
    raise ValueError(f"cannot pair {count} names with the defaults {cell!r}")


def page_rows(path, in_config):
    """(line number, in the Configuration page?, names, defaults) for every settings row."""
    for number, line in enumerate(open(path, encoding="utf-8"), 1):
        if not line.startswith("| `"):
            continue
        row = cells(line)
        names = names_of(row[0])
        if names and len(row) >= 3:
            stated = re.match(r"(\d+)\.\.(\d+)\b", row[2])
            yield (number, in_config, names, defaults_of(row[1], len(names)),
                   (stated.group(1), stated.group(2)) if stated else None)


def main():
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    delayd, docs, registry = sys.argv[1:]
    config_page = os.path.join(docs, "operating", "configuration.md")
    pages = [(os.path.join(root, name), os.path.join(root, name) == config_page)
             for root, _, names in sorted(os.walk(docs)) for name in sorted(names) if name.endswith(".md")]
    if not os.path.isfile(config_page):
        print(f"no {config_page}", file=sys.stderr)
        return 2
    ranges = table_ranges(registry)
    if not ranges:
        print(f"no integer settings found in {registry}", file=sys.stderr)
        return 2
    try:
        printed = printed_defaults(delayd)
    except (OSError, subprocess.SubprocessError, tomllib.TOMLDecodeError) as e:
        print(f"cannot run {delayd} --print-config: {e}", file=sys.stderr)
        return 2
    problems = []
    documented = set()
    rows = 0
    checked_ranges = 0
    rows_of_pages = ((os.path.relpath(page), row) for page, in_config in pages for row in page_rows(page, in_config))
    for where, (number, in_config, names, defaults, stated) in rows_of_pages:
        rows += 1
        if stated and len(names) == 1 and names[0] in ranges:
            checked_ranges += 1
            if stated != ranges[names[0]]:
                problems.append(f"{where}:{number}: `{names[0]}` range {stated[0]}..{stated[1]}, "
                                f"but the settings table says {ranges[names[0]][0]}..{ranges[names[0]][1]}")
        for name, default in zip(names, defaults):
            if name not in printed:
                # A row naming something that is not a setting (a metric, a file) is not ours.
                if name.split(".")[0] in {"kafka", "redis", "wheel", "scheduler", "log", "admin"}:
                    problems.append(f"{where}:{number}: `{name}` is not a setting delayd knows")
                continue
            if in_config:
                documented.add(name)
            if default is not None and printed[name] is not None and default != printed[name]:
                problems.append(f"{where}:{number}: `{name}` default `{default}`, "
                                f"but delayd --print-config says `{printed[name]}`")
    for name in sorted(set(printed) - documented):
        problems.append(f"`{name}` is not in the table of {os.path.relpath(config_page)}")
    for p in problems:
        print(p)
    if problems:
        print(f"documented settings: {len(problems)} differences from delayd --print-config")
        return 1
    print(f"documented settings: all {len(printed)} settings documented in {rows} rows; "
          f"every stated default equals delayd --print-config, and the {checked_ranges} stated ranges "
          f"equal the settings table's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
