#!/usr/bin/env bash
# The TypeScript client's tests (tests/clients/ts/): installs its packages (scripts/npm-ci.sh:
# npm ci in clients/ts, whose node_modules is git-ignored; again only when package.json or
# package-lock.json changed),
# compiles the client, the tests and examples/ts with tsc (incremental, into the build directory),
# then runs one of them with node:
#   ts_test.sh vectors   <build dir> <vectors dir>           every vector, node's test runner
#   ts_test.sh roundtrip <build dir> <delayd> <delayctl>     against delayd and the local stack
# Without node or npm: skipped, failed under CI=true (tests/support/requires.sh).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
source "$HERE/../support/requires.sh"
require_tool node "Debian package nodejs"
require_tool npm "Debian package npm"

mode="$1" out="$2/ts"
CLIENT="$ROOT/clients/ts"
mkdir -p "$out"
# One install and compile at a time (build/ and build-asan/ share clients/ts/node_modules).
exec 9>"$CLIENT/.install.lock"
flock 9
"$ROOT/scripts/npm-ci.sh" "$CLIENT"
"$CLIENT/node_modules/.bin/tsc" -p "$HERE/ts/tsconfig.json" --outDir "$out/js" --tsBuildInfoFile "$out/tsbuildinfo"
flock -u 9

# The compiled client finds kafkajs here (it is compiled outside clients/ts).
export NODE_PATH="$CLIENT/node_modules"
case "$mode" in
  vectors) DELAYD_VECTORS="$3" exec node --test "$out/js/tests/clients/ts/vectors.test.js" ;;
  roundtrip) exec node "$out/js/tests/clients/ts/roundtrip.js" "$3" "$4" "$out" ;;
  *) echo "usage: ts_test.sh vectors|roundtrip <build dir> ..." >&2; exit 2 ;;
esac
