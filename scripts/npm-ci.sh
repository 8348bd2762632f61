#!/usr/bin/env bash
# Installs the npm packages of one folder of this repository (its package-lock.json, exactly:
# npm ci), once per content of its package.json and package-lock.json, under a lock so that two
# tests installing the same folder at once do not meet. node_modules stays in the folder
# (git-ignored there); a stamp file in it records which content it holds.
#   scripts/npm-ci.sh clients/ts        (tests/clients/ts_test.sh)
#   scripts/npm-ci.sh bench/bullmq      (bench/run-bullmq.sh)
set -euo pipefail
dir="${1:?usage: scripts/npm-ci.sh DIR}"
if [[ ! -f "$dir/package.json" || ! -f "$dir/package-lock.json" ]]; then
  echo "npm-ci: no package.json and package-lock.json in $dir" >&2
  exit 2
fi
exec 8>"$dir/.npm-ci.lock"
flock 8
stamp="$(cat "$dir/package.json" "$dir/package-lock.json" | sha256sum | cut -c1-16)"
if [[ ! -f "$dir/node_modules/.installed-$stamp" ]]; then
  (cd "$dir" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error)
  touch "$dir/node_modules/.installed-$stamp"
fi
