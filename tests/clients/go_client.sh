#!/usr/bin/env bash
# The Go client (clients/go), as tests/clients checks the Python one:
#   go_client.sh vectors <output dir>
#       gofmt and go vet over the client, its example (examples/go) and its round trip; go test
#       of the record builders against every shared test vector (clients/vectors); the example
#       built into <output dir>, so that it cannot rot. No Kafka needed.
#   go_client.sh roundtrip <delayd> <delayctl> <output dir>
#       tests/clients/go/main.go against a real delayd (needs KAFKA_BOOTSTRAP, REDIS_URL).
# A missing Go toolchain skips, or fails under CI=true (tests/support/requires.sh). Modules come
# from the Go module cache (scripts/install-deps.sh downloads them), builds from Go's build cache.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
source "$HERE/../support/requires.sh"

GO="$(command -v go || true)"
if [[ -z "$GO" && -x /usr/local/go/bin/go ]]; then GO=/usr/local/go/bin/go; fi
[[ -n "$GO" ]] || missing_tool "go not found (Go 1.26, at /usr/local/go/bin or on PATH)"
MODULES=("$ROOT/clients/go" "$ROOT/examples/go" "$HERE/go")
# Programs are built with -buildvcs=false: no git stamp, so a checkout git will not vouch for
# (another owner, no .git) builds the same.

case "${1:-}" in
  vectors)
    out="$2"
    unformatted="$("$("$GO" env GOROOT)/bin/gofmt" -l "${MODULES[@]}")"
    if [[ -n "$unformatted" ]]; then
      echo "FAIL: not gofmt-formatted: $unformatted"
      exit 1
    fi
    for m in "${MODULES[@]}"; do (cd "$m" && "$GO" vet ./...); done
    (cd "$ROOT/clients/go" && "$GO" test -count=1 -v ./... -args -vectors "$ROOT/clients/vectors") |
      grep -v '^=== '
    (cd "$ROOT/examples/go" && "$GO" build -buildvcs=false -o "$out/go-schedule-and-work" .)
    echo "built examples/go: $out/go-schedule-and-work"
    ;;
  roundtrip)
    shift
    cd "$HERE/go"
    exec "$GO" run -buildvcs=false . "$@"
    ;;
  *)
    echo "usage: go_client.sh vectors <output dir> | roundtrip <delayd> <delayctl> <output dir>" >&2
    exit 2
    ;;
esac
