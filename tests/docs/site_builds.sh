#!/usr/bin/env bash
# The documentation site builds: `mkdocs build --strict` of mkdocs.yml (docs/, MkDocs Material)
# into the build tree. Strict, with mkdocs.yml's validation settings: a broken link or anchor,
# a page left out of nav, a missing snippet of README.md, or any other warning fails it.
# A missing mkdocs-material skips the test, or fails it under CI=true (install-deps.sh installs it).
#   site_builds.sh <repository> <site output directory>
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../support/requires.sh"
repo="$1" out="$2"
python3 -c 'import mkdocs, material' 2>/dev/null ||
  missing_tool "mkdocs-material not found for python3 (scripts/install-deps.sh installs it from PyPI)"
cd "$repo"
NO_MKDOCS_2_WARNING=1 python3 -m mkdocs build --strict --config-file mkdocs.yml --site-dir "$out"
echo "docs site: $(find "$out" -name '*.html' | wc -l) pages built in $out"
