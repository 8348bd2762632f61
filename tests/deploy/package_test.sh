#!/usr/bin/env bash
# The Debian package, end to end: scripts/package.sh builds it from the build directory ctest runs
# in; its control fields, files, conffiles and Depends are checked; `dpkg -i` installs it (the
# user delayd appears); `systemd-analyze verify` checks the unit; then delayd starts as the unit
# would start it (no systemd runs here: the test reads the unit's User, Group, EnvironmentFile and
# ExecStart and runs that command line itself, as that user, with a clean environment), with the
# installed /etc/delayd/delayd.toml pointed at the stack; a job goes through it to its ready
# topic (read committed) and delayctl, run as the user with the same file, finds it ready;
# SIGTERM stops it cleanly within the unit's TimeoutStopSec; a second `dpkg -i` keeps the changed
# configuration; `dpkg --purge` removes everything. Whatever happens, the test leaves no package,
# user, process or file behind.
#
#   package_test.sh <repository> <build directory>
#
# Needs root (dpkg -i), KAFKA_BOOTSTRAP and REDIS_URL (scripts/stack.sh env), and dpkg-deb,
# dpkg-shlibdeps, cpack, file, systemd-analyze, setpriv, adduser, kcat, curl: a missing one skips
# the test (exit 77), or fails it under CI=true (tests/support/requires.sh).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../support/requires.sh"
repo="$(cd "$1" && pwd)" build="$(cd "$2" && pwd)"

[[ $(id -u) -eq 0 ]] || missing_tool "root (dpkg -i installs the package system-wide)"
require_tool dpkg-deb "Debian's dpkg"
require_tool dpkg-shlibdeps "Debian's dpkg-dev: scripts/install-deps.sh installs it"
require_tool cpack "Debian's cmake"
require_tool file "Debian's file: scripts/install-deps.sh installs it"
require_tool systemd-analyze "Debian's systemd: scripts/install-deps.sh installs it"
require_tool setpriv "Debian's util-linux"
require_tool adduser "Debian's adduser"
require_tool kcat "scripts/install-deps.sh installs it"
require_tool curl "scripts/install-deps.sh installs it"
source "$here/../support/delayd_world.sh"  # wait_for_topic; needs KAFKA_BOOTSTRAP and REDIS_URL

say() { echo "package: $*"; }
free_port() { python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import checks; print(checks.free_port())' "$here/../support"; }
fail() {
  echo "FAIL: $*"
  exit 1
}

# What this test changes on the machine, each undone at the exit, also after a failure. A kill
# the trap cannot catch (ctest's timeout, SIGKILL) leaves them behind; so the test notes what it is
# about to change in $leftover before it installs, and the next run, finding that note, undoes
# what the killed run left (its package, /etc/default/delayd, the user if the run made it, its
# work directory) first.
leftover=/var/lib/delayd-package-test.leftover
if [[ -e "$leftover" ]]; then
  say "an earlier run was killed before its cleanup ($leftover): undoing what it left"
  if dpkg-query -W -f='${Status}' delayd 2>/dev/null | grep -q 'installed'; then
    dpkg --purge delayd >/dev/null 2>&1 </dev/null || fail "dpkg --purge delayd (left by an earlier run) failed"
  fi
  rm -f /etc/default/delayd
  if grep -qx 'user_was_there=0' "$leftover"; then
    userdel delayd 2>/dev/null || true
    groupdel delayd 2>/dev/null || true
  fi
  old_work="$(sed -n 's|^work=\(/tmp/delayd-package-[A-Za-z0-9]*\)$|\1|p' "$leftover")"
  [[ -z "$old_work" ]] || rm -rf "$old_work"
  rm -f "$leftover"
fi
if dpkg-query -W -f='${Status}' delayd 2>/dev/null | grep -q 'installed'; then
  fail "a package delayd is installed on this machine; this test would replace it (dpkg --purge delayd first)"
fi
[[ ! -e /etc/default/delayd ]] || fail "/etc/default/delayd exists; this test writes its own there"
user_was_there=0
getent passwd delayd >/dev/null && user_was_there=1
work="$(mktemp -d /tmp/delayd-package-XXXXXX)"
chmod 755 "$work"
pid=""
installed=0
cleanup() {
  local status=$?
  if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  if ((installed)); then dpkg --purge delayd >/dev/null 2>&1 || echo "package: cleanup: dpkg --purge delayd failed"; fi
  rm -f /etc/default/delayd
  if ((!user_was_there)) && getent passwd delayd >/dev/null; then
    userdel delayd 2>/dev/null || echo "package: cleanup: userdel delayd failed"
  fi
  if ((!user_was_there)) && getent group delayd >/dev/null; then groupdel delayd 2>/dev/null || true; fi
  rm -rf "$work"
  # The note goes once the package is gone; a failed purge leaves it for the next run.
  dpkg-query -W -f='${Status}' delayd 2>/dev/null | grep -q 'installed' || rm -f "$leftover"
  exit "$status"
}
trap cleanup EXIT

# --- build and inspect ----------------------------------------------------------------------
started=$SECONDS
BUILD_DIR="$build" OUT_DIR="$work/dist" BUILD_JOBS=1 "$repo/scripts/package.sh" >"$work/package.log" 2>&1 ||
  { cat "$work/package.log"; fail "scripts/package.sh failed"; }
deb="$(sed -n 's/^package: //p' "$work/package.log" | tail -n 1)"
[[ -f "$deb" ]] || { cat "$work/package.log"; fail "scripts/package.sh named no package"; }
version="$(sed -n 's/^project(delayd VERSION \([0-9.]*\).*/\1/p' "$repo/CMakeLists.txt")"
say "built $(basename "$deb") ($(($(stat -c %s "$deb") / 1024)) KiB) in $((SECONDS - started)) s"
[[ "$(basename "$deb")" == "delayd_${version}_$(dpkg --print-architecture).deb" ]] ||
  fail "package file $(basename "$deb"), expected delayd_${version}_<arch>.deb"
[[ "$(dpkg-deb -f "$deb" Version)" == "$version" ]] || fail "Version $(dpkg-deb -f "$deb" Version), CMake says $version"
depends="$(dpkg-deb -f "$deb" Depends)"
say "Depends: $depends"
# The names alone, one a line (versions and alternatives dropped).
depends_names="$(tr ',|' '\n\n' <<<"$depends" | sed 's/^ *//; s/ .*//' | sort -u)"
# A library's package by the name its soname gives, or that name with a suffix of a rebuild
# (Debian 12's point releases name spdlog's libspdlog1.10-fmt9).
for want in adduser tzdata librdkafka++1 libhiredis0.14 libjemalloc2 libspdlog1.10 libprometheus-cpp-core1.0 \
  libdate-tz3 libssl3 libzstd1; do
  grep -qE -- "^${want//+/\\+}(-[a-z0-9.]+)?$" <<<"$depends_names" || fail "Depends lacks $want"
done
# The latest librdkafka delayd knows good that the build's librdkafka reaches is asked for: one
# that does not spin (DELAYD_LIBRDKAFKA_NO_SPIN), one that keeps its assignment through a refused
# commit (DELAYD_LIBRDKAFKA_KEEPS_ASSIGNMENT), or none (cmake/Package.cmake).
built_on="$(pkg-config --modversion rdkafka)"
known=()
wanted=""
for fact in NO_SPIN KEEPS_ASSIGNMENT; do
  v="$(sed -n "s/^set(DELAYD_LIBRDKAFKA_$fact \([0-9.]*\)).*/\1/p" "$repo/CMakeLists.txt")"
  [[ -n "$v" ]] || fail "CMakeLists.txt sets no DELAYD_LIBRDKAFKA_$fact"
  known+=("$v")
  if dpkg --compare-versions "$built_on" ge "$v"; then wanted="$v"; fi
done
# dpkg-shlibdeps adds its own librdkafka1 (>= 2.0.0) from the symbols; only these are delayd's.
for v in "${known[@]}"; do
  asks=no
  grep -qF "librdkafka1 (>= $v)" <<<"$depends" && asks=yes
  if [[ "$v" == "$wanted" ]]; then
    [[ "$asks" == yes ]] || fail "built against librdkafka $built_on, the package does not ask for $v or later"
  else
    [[ "$asks" == no ]] || fail "built against librdkafka $built_on, the package asks for $v, not ${wanted:-no version}"
  fi
done
say "librdkafka: built against $built_on; asks for ${wanted:-no version} of ${known[*]}"
dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles >"$work/conffiles"
[[ "$(cat "$work/conffiles")" == "/etc/delayd/delayd.toml" ]] || fail "conffiles: $(cat "$work/conffiles")"
for script in postinst prerm postrm; do
  dpkg-deb --ctrl-tarfile "$deb" | tar -t | grep -x "./$script" >/dev/null || fail "no $script in the package"
done

# --- install ----------------------------------------------------------------------------------
printf 'user_was_there=%s\nwork=%s\n' "$user_was_there" "$work" >"$leftover"
installed=1
dpkg -i "$deb" >"$work/dpkg.log" 2>&1 </dev/null || { cat "$work/dpkg.log"; fail "dpkg -i failed"; }
say "dpkg -i: $(dpkg-query -W -f='${Package} ${Version} ${Status}' delayd)"
say "files:"
dpkg -L delayd | while read -r f; do [[ -d "$f" ]] || printf 'package:   %s\n' "$f"; done
for f in /usr/bin/delayd /usr/bin/delayctl; do [[ -x "$f" ]] || fail "$f is not installed executable"; done
for f in /etc/delayd/delayd.toml /lib/systemd/system/delayd.service; do [[ -f "$f" ]] || fail "$f is not installed"; done
entry="$(getent passwd delayd)" || fail "postinst made no user delayd"
[[ "$(cut -d: -f7 <<<"$entry")" == /usr/sbin/nologin ]] || fail "user delayd: shell $(cut -d: -f7 <<<"$entry")"
(($(cut -d: -f3 <<<"$entry") < 1000)) || fail "user delayd is no system user: $entry"
say "user: $entry"
say "delayd --version: $(/usr/bin/delayd --version)"
say "delayctl --version: $(/usr/bin/delayctl --version)"
/usr/bin/delayd --version | grep "^delayd $version " >/dev/null || fail "the installed delayd is not $version"
# Every library the two binaries ask for by name comes from a package the package depends on.
for bin in /usr/bin/delayd /usr/bin/delayctl; do
  while read -r lib path; do
    # dpkg knows a library by the path its package ships (/lib/... or /usr/lib/...): try both.
    owner="$({ dpkg -S "$path" || dpkg -S "$(realpath "$path")" || dpkg -S "${path#/usr}"; } 2>/dev/null |
      head -n 1 | cut -d: -f1 || true)"
    [[ -n "$owner" ]] || fail "$bin needs $lib ($path), which no package owns"
    # Named by the package, or by a name it Provides (libspdlog1.10 provides libspdlog1.10-fmt9).
    provides="$(dpkg-query -W -f='${Provides}' "$owner" 2>/dev/null | tr ',' '\n' | sed 's/^ *//; s/ .*//')"
    grep -qxF -f <(printf '%s\n' "$owner" $provides) <<<"$depends_names" ||
      fail "$bin needs $lib from $owner, which Depends does not name"
  done < <(ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' |
    grep -F -f <(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'))
done
say "each library delayd and delayctl need is in Depends"

# --- the unit ---------------------------------------------------------------------------------
unit=/lib/systemd/system/delayd.service
verify="$(cd / && systemd-analyze verify "$unit" 2>&1)" || { echo "$verify"; fail "systemd-analyze verify $unit failed"; }
[[ -z "$verify" ]] || { echo "$verify"; fail "systemd-analyze verify $unit warned"; }
say "systemd-analyze verify $unit: no complaint"
key() { sed -n "s/^$1=//p" "$unit" | tail -n 1; }
for want in "Restart=on-failure" "User=delayd" "Group=delayd" "NoNewPrivileges=yes" "ProtectSystem=strict" \
  "ProtectHome=yes" "PrivateTmp=yes" "CapabilityBoundingSet=" "WantedBy=multi-user.target"; do
  grep -qx "$want" "$unit" || fail "$unit lacks $want"
done
user="$(key User)" group="$(key Group)" exec_start="$(key ExecStart)" env_file="$(key EnvironmentFile)"
stop_timeout="$(key TimeoutStopSec)" stop_timeout="${stop_timeout%s}"
shutdown_ms="$(/usr/bin/delayd --config /etc/delayd/delayd.toml --print-config json | python3 -c \
  'import json, sys; print(json.load(sys.stdin)["scheduler"]["shutdown_timeout_ms"])')"
((stop_timeout * 1000 >= shutdown_ms + 10000)) ||
  fail "TimeoutStopSec=${stop_timeout}s leaves under 10 s above scheduler.shutdown_timeout_ms ($shutdown_ms ms)"
say "unit: User=$user Group=$group ExecStart=$exec_start EnvironmentFile=$env_file TimeoutStopSec=${stop_timeout}s"

# --- run it as the unit would, on the stack ----------------------------------------------------
run="pkg-$$-$(date +%s%N)"
admin="127.0.0.1:$(free_port)"
# The installed file pointed at the stack and at a free admin port: what an operator edits.
sed -i -e "s|^bootstrap = .*|bootstrap = \"$KAFKA_BOOTSTRAP\"|" -e "s|^url = .*|url = \"$REDIS_URL\"|" \
  -e "s|^listen = .*|listen = \"$admin\"|" /etc/delayd/delayd.toml
# A world of its own (topics, groups, Redis prefix), through the unit's EnvironmentFile.
env_path="${env_file#-}"
[[ "$env_path" == /etc/default/delayd ]] || fail "EnvironmentFile is $env_file, expected -/etc/default/delayd"
cat >"$env_path" <<EOF
DELAYD_KAFKA_INGEST_TOPIC=$run.ingest
DELAYD_KAFKA_DLQ_TOPIC=$run.dlq
DELAYD_KAFKA_STATUS_TOPIC=$run.status
DELAYD_KAFKA_READY_TOPIC_TEMPLATE=$run.ready.{business}
DELAYD_KAFKA_GROUP_ID=$run
DELAYD_REDIS_PREFIX=$run
EOF
# The unit's user and group, no privileges, systemd's clean environment.
# shellcheck disable=SC2207
unit_prefix=(setpriv --reuid="$user" --regid="$group" --init-groups --no-new-privs --inh-caps=-all
  env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin $(grep -v '^#' "$env_path"))
as_unit() { (cd / && exec "${unit_prefix[@]}" "$@"); } # command...: run as the unit would
as_unit /usr/bin/delayd --config /etc/delayd/delayd.toml --print-config >"$work/print-config" 2>&1 ||
  { cat "$work/print-config"; fail "delayd --print-config of the installed file failed as user $user"; }
read -r -a command <<<"$exec_start"
# A subshell that execs (no function around it): $! is then delayd's own pid.
(cd / && exec "${unit_prefix[@]}" "${command[@]}") >"$work/delayd.log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do
  [[ "$(curl -s -o /dev/null -w '%{http_code}' "http://$admin/readyz")" == 200 ]] && break
  kill -0 "$pid" 2>/dev/null || { cat "$work/delayd.log"; fail "the installed delayd exited at start-up"; }
  sleep 0.1
done
[[ "$(curl -s -o /dev/null -w '%{http_code}' "http://$admin/readyz")" == 200 ]] ||
  { cat "$work/delayd.log"; fail "the installed delayd was not ready within 60 s"; }
[[ "$(ps -o user= -p "$pid")" == "$user" ]] || fail "delayd runs as $(ps -o user= -p "$pid"), not $user"
say "delayd runs as $(ps -o user=,args= -p "$pid"), ready on $admin"

job="$run-job"
echo 'hello from the package' | kcat -P -b "$KAFKA_BOOTSTRAP" -t "$run.ingest" -k "$job" \
  -H "deliver-at=$(($(date +%s%3N) + 1000))" -H business=pkg -H "job-id=$job"
wait_for_topic "$run.ready.pkg"
got="$(timeout 30 kcat -C -b "$KAFKA_BOOTSTRAP" -t "$run.ready.pkg" -X isolation.level=read_committed \
  -o beginning -c 1 -f '%h %s\n' 2>/dev/null || true)"
grep -q "job-id=$job" <<<"$got" || { cat "$work/delayd.log"; fail "no ready record of $job (read: $got)"; }
say "delivered: $got"
for _ in $(seq 1 100); do
  as_unit /usr/bin/delayctl --config /etc/delayd/delayd.toml get "$job" 2>/dev/null | grep '"state": "ready"' >/dev/null && break
  sleep 0.1
done
as_unit /usr/bin/delayctl --config /etc/delayd/delayd.toml get "$job" | grep '"state": "ready"' >/dev/null ||
  fail "delayctl get $job (as $user) does not say ready"
say "delayctl get $job as $user: ready"

# A clean stop, as systemd's would be: SIGTERM, an exit 0 within TimeoutStopSec.
stop_started=$(date +%s%3N)
kill -TERM "$pid"
stopped=0
for _ in $(seq 1 $((stop_timeout * 10))); do
  kill -0 "$pid" 2>/dev/null || { stopped=1; break; }
  sleep 0.1
done
((stopped)) || { cat "$work/delayd.log"; fail "delayd did not stop within TimeoutStopSec=${stop_timeout}s"; }
code=0
wait "$pid" || code=$?
pid=""
((code == 0)) || { cat "$work/delayd.log"; fail "delayd exited $code after SIGTERM"; }
say "SIGTERM: stopped cleanly in $(($(date +%s%3N) - stop_started)) ms (TimeoutStopSec=${stop_timeout}s)"

# --- upgrade keeps the changed configuration; purge removes everything ------------------------
dpkg -i "$deb" >"$work/dpkg.log" 2>&1 </dev/null || { cat "$work/dpkg.log"; fail "a second dpkg -i failed"; }
grep -qx "bootstrap = \"$KAFKA_BOOTSTRAP\"" /etc/delayd/delayd.toml ||
  fail "dpkg -i over the installed package did not keep the changed /etc/delayd/delayd.toml"
say "a second dpkg -i kept the changed /etc/delayd/delayd.toml"
rm -f "$env_path"
dpkg --purge delayd >"$work/dpkg.log" 2>&1 </dev/null || { cat "$work/dpkg.log"; fail "dpkg --purge failed"; }
installed=0
for f in /usr/bin/delayd /usr/bin/delayctl /etc/delayd /lib/systemd/system/delayd.service; do
  [[ ! -e "$f" ]] || fail "$f is left after dpkg --purge"
done
say "dpkg --purge removed every file; the user delayd is left to the cleanup (postrm keeps system users)"
say "done in $((SECONDS - started)) s"
