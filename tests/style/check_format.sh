#!/usr/bin/env bash
# check_format.sh REPO: fails (listing them) when a tracked .cpp or .hpp of REPO is not as
# clang-format-14 formats it with REPO's .clang-format. Exit 0 clean, 1 not, 77 skipped.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../support/requires.sh"
repo=${1:?usage: check_format.sh REPO}
require_tool clang-format-14 "scripts/install-deps.sh installs Debian's clang-format-14"
require_tool git "the files checked are git's tracked ones"
cd "$repo"
mapfile -t files < <(git ls-files '*.cpp' '*.hpp')
((${#files[@]} > 0)) || { echo "FAIL: no tracked .cpp or .hpp under $repo"; exit 1; }
# One run over them all (a second); file by file only to name the ones that fail.
if clang-format-14 --dry-run -Werror "${files[@]}" >/dev/null 2>&1; then
  echo "ok: ${#files[@]} files clang-formatted"
  exit 0
fi
unformatted=()
for f in "${files[@]}"; do
  clang-format-14 --dry-run -Werror "$f" >/dev/null 2>&1 || unformatted+=("$f")
done
if ((${#unformatted[@]} > 0)); then
  echo "FAIL: ${#unformatted[@]} of ${#files[@]} files are not clang-formatted:"
  printf '  %s\n' "${unformatted[@]}"
  echo "fix them with: clang-format-14 -i ${unformatted[*]}"
  exit 1
fi
echo "FAIL: clang-format-14 failed on the files together, but on none alone"
exit 1
