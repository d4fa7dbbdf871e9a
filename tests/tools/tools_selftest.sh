#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The test tools check each other: hr-test-load must measure the delay that
# hr-test-server was told to add, in both protocols; it must count non-2xx
# answers as errors; and it must exit on time against a stopped server.
# Usage: tools_selftest.sh HR_TEST_SERVER HR_TEST_LOAD
set -euo pipefail
server_bin=$1
load_bin=$2
work=$(mktemp -d)
server_pid=
cleanup() {
  if [[ -n $server_pid ]]; then
    kill -CONT "$server_pid" 2>/dev/null || true
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

fail() { echo "FAIL: $*"; exit 1; }

# start_server ARGS...: starts hr-test-server on an ephemeral port; sets
# server_pid and port.
start_server() {
  "$server_bin" --port 0 "$@" > "$work/server.out" &
  server_pid=$!
  port=
  for _ in $(seq 100); do
    port=$(sed -n '1s/^port=\([0-9]*\)$/\1/p' "$work/server.out")
    [[ -n $port ]] && return 0
    kill -0 "$server_pid" 2>/dev/null || fail "hr-test-server $* exited before listening"
    sleep 0.05
  done
  fail "hr-test-server $* printed no port=<n> line within 5 s"
}

stop_server() {
  kill -TERM "$server_pid"
  local rc=0
  wait "$server_pid" || rc=$?
  server_pid=
  [[ $rc -eq 0 ]] || fail "hr-test-server exited $rc on SIGTERM, want 0"
}

# field JSON NAME: a number (or null) from the one-line report.
field() { sed -n "s/.*\"$2\":\([0-9.]*\|null\)[,}].*/\1/p" <<< "$1"; }

# check_p50 WHAT JSON LOW_US HIGH_US: more than 20 requests, no errors, p50 in range.
check_p50() {
  local what=$1 json=$2 low=$3 high=$4
  echo "$what: $json"
  local requests errors p50
  requests=$(field "$json" requests)
  errors=$(field "$json" errors)
  p50=$(field "$json" p50_us)
  [[ -n $requests && $requests -gt 20 ]] || fail "$what: requests=$requests, want > 20"
  [[ $errors == 0 ]] || fail "$what: errors=$errors, want 0"
  awk -v p="$p50" -v lo="$low" -v hi="$high" 'BEGIN { exit !(p != "null" && p >= lo && p <= hi) }' ||
    fail "$what: p50_us=$p50, want between $low and $high"
}

# 1. HTTP: a 20 ms path delay measures as 20..30 ms.
start_server --mode http --delay /slow=20ms --status /err=500
json=$("$load_bin" --port "$port" --mode http --connections 4 --duration 1s --path /slow)
check_p50 "http /slow=20ms" "$json" 20000 30000

# 2. HTTP: non-2xx answers are errors; --requests is exact.
json=$("$load_bin" --port "$port" --mode http --connections 2 --requests 10 --path /err)
echo "http /err=500: $json"
[[ $(field "$json" requests) == 10 && $(field "$json" errors) == 10 ]] ||
  fail "http /err=500: want requests=10 errors=10"

# 3. A stopped server: requests stay outstanding and the client still exits on time.
kill -STOP "$server_pid"
start=$(date +%s%N)
json=$("$load_bin" --port "$port" --mode http --connections 3 --duration 1s --path /)
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
echo "http, server stopped (${elapsed_ms} ms): $json"
[[ $elapsed_ms -lt 3000 ]] || fail "stopped server: hr-test-load took ${elapsed_ms} ms, want < 3000"
[[ $(field "$json" outstanding) == 3 ]] || fail "stopped server: want outstanding=3"
kill -CONT "$server_pid"
stop_server

# 4. Line protocol: "5000" asks for 5 ms, which measures as 5..15 ms.
start_server --mode line
json=$("$load_bin" --port "$port" --mode line --connections 4 --duration 1s --line 5000)
check_p50 "line 5000us" "$json" 5000 15000
stop_server

echo "PASS"
