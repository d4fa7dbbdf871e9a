#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# systemd/headroomd.service: `systemd-analyze verify` says nothing, and the
# offline security exposure stays below a threshold (docs/systemd.md).
#   unit_test.sh SOURCE_DIR HEADROOMD_BINARY MAX_EXPOSURE
set -eu
src=$1 bin=$2 max=$3
. "$src/tests/packaging/lib.sh"
need systemd-analyze
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# verify needs an existing ExecStart: point the unit at the built binary.
sed "s#^ExecStart=/usr/sbin/headroomd #ExecStart=$bin #" "$src/systemd/headroomd.service" >"$tmp/headroomd.service"
grep -q "^ExecStart=$bin " "$tmp/headroomd.service" || fail "ExecStart is not /usr/sbin/headroomd"
# Unknown keys only warn with rc 0: any output is a failure. --man=no: the man
# pages are checked in the package (lintian), not installed on this host.
out=$(systemd-analyze verify --man=no "$tmp/headroomd.service" 2>&1) || fail "verify: rc $?: $out"
[ -z "$out" ] || fail "systemd-analyze verify printed: $out"
echo "verify: clean"

report=$(systemd-analyze security --offline=true --no-pager "$tmp/headroomd.service" 2>&1) || true
score=$(printf '%s\n' "$report" | sed -n 's/.*Overall exposure level for headroomd.service: \([0-9.]*\).*/\1/p')
[ -n "$score" ] || fail "no exposure score in: $report"
echo "exposure: $score (must be < $max)"
awk -v s="$score" -v m="$max" 'BEGIN { exit !(s < m) }' || { printf '%s\n' "$report" >&2; fail "exposure $score >= $max"; }
# The capabilities the eBPF probes will need must survive hardening edits.
for cap in CAP_BPF CAP_PERFMON; do
  grep -q "^CapabilityBoundingSet=.*$cap" "$src/systemd/headroomd.service" || fail "$cap missing from CapabilityBoundingSet"
done
grep -q '^SystemCallFilter=@system-service bpf perf_event_open$' "$src/systemd/headroomd.service" ||
  fail "SystemCallFilter must allow bpf and perf_event_open"
