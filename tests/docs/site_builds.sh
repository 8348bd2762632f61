#!/usr/bin/env bash
# The documentation site builds: `mkdocs build --strict` of mkdocs.yml (docs/, MkDocs Material)
# into the build tree. Strict, with mkdocs.yml's validation settings: a broken link or anchor,
# a page left out of nav, a missing snippet of README.md, or any other warning fails it. Then
# README.md's own links into docs/ (which mkdocs does not read) must land on a built page and,
# with a #fragment, on an id of that page.
# A missing mkdocs-material skips the test, or fails it under CI=true (install-deps.sh installs it).
#   site_builds.sh <repository> <site output directory>
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../support/requires.sh"
repo="$1" out="$2"
python3 -c 'import mkdocs, material' 2>/dev/null ||
  missing_tool "mkdocs-material not found for python3 (scripts/install-deps.sh installs it from PyPI)"
cd "$repo"
NO_MKDOCS_2_WARNING=1 python3 -m mkdocs build --strict --config-file mkdocs.yml --site-dir "$out"
python3 - "$out" README.md <<'PY'
import os, re, sys
site, readme = sys.argv[1:]
bad = 0
links = re.findall(r"\]\((docs/[^)#\s]+\.md)(?:#([^)\s]+))?\)", open(readme, encoding="utf-8").read())
for page, fragment in links:
    rel = page[len("docs/"):-len(".md")]
    html = os.path.join(site, "index.html" if rel == "index" else os.path.join(rel.removesuffix("/index"), "index.html"))
    if not os.path.isfile(html):
        print(f"FAIL: README.md links to {page}, which is not a page of the site")
        bad += 1
    elif fragment and f'id="{fragment}"' not in open(html, encoding="utf-8").read():
        print(f"FAIL: README.md links to {page}#{fragment}, which has no such anchor")
        bad += 1
print(f"docs site: README.md's {len(links)} links into docs/ land" if not bad else f"docs site: {bad} broken links")
sys.exit(1 if bad else 0)
PY
echo "docs site: $(find "$out" -name '*.html' | wc -l) pages built in $out"
