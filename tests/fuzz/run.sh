#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Runs the libFuzzer targets of tests/fuzz/ built in BUILD_DIR (configured
# with -DHEADROOM_FUZZ=ON, docs/fuzzing.md), one after the other, each for
# SECONDS_PER_TARGET seconds of fuzzing.
#
#   tests/fuzz/run.sh BUILD_DIR SECONDS_PER_TARGET [TARGET...]
#
# For each target (all fuzz_* when none is named): first replays every file
# in tests/fuzz/regressions/<target>/ (inputs that once crashed), then fuzzes
# a scratch copy of tests/fuzz/corpus/<target>/ in BUILD_DIR/fuzz/corpus/
# (the checked-in corpus never grows), with tests/fuzz/<target>.dict when
# there is one. Prints one line per target: runs, seconds, coverage (cov:
# edges, ft: features), corpus size. The full output is in
# BUILD_DIR/fuzz/logs/<target>.log, a crashing input in
# BUILD_DIR/fuzz/artifacts/<target>/. An input that runs for a minute is a
# hang (the limit is generous: on a loaded machine, or under nice, a fast
# input may wait seconds for a CPU). Exits 1 when a target crashed (naming
# the input), 2 on a usage error or a target that is not built.
set -eu
usage() { echo "usage: $0 BUILD_DIR SECONDS_PER_TARGET [TARGET...]" >&2; exit 2; }
[ $# -ge 2 ] || usage
build=$1 seconds=$2
shift 2
case "$seconds" in '' | *[!0-9]*) usage ;; esac
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -eq 0 ]; then
  set -- $(cd "$here" && ls fuzz_*.cc | sed 's/\.cc$//')
fi
out=$build/fuzz
mkdir -p "$out/logs"
failed=0
for target in "$@"; do
  bin=$build/tests/fuzz/$target
  if [ ! -x "$bin" ]; then
    echo "$target: $bin is not built; configure $build with -DHEADROOM_FUZZ=ON and build it (docs/fuzzing.md)" >&2
    exit 2
  fi
  log=$out/logs/$target.log
  artifacts=$out/artifacts/$target
  corpus=$out/corpus/$target
  rm -rf "$corpus" "$artifacts"
  mkdir -p "$corpus" "$artifacts"
  : >"$log"

  # Inputs that crashed once must never crash again.
  if [ -d "$here/regressions/$target" ] && [ -n "$(ls -A "$here/regressions/$target")" ]; then
    if ! "$bin" "$here/regressions/$target"/* >>"$log" 2>&1; then
      echo "$target: CRASH replaying tests/fuzz/regressions/$target/ (see $log)"
      failed=1
      continue
    fi
  fi

  cp -R "$here/corpus/$target/." "$corpus/"
  set -- -max_total_time="$seconds" -timeout=60 -print_final_stats=1 -artifact_prefix="$artifacts/"
  [ -f "$here/$target.dict" ] && set -- "$@" -dict="$here/$target.dict"
  start=$(date +%s)
  rc=0
  "$bin" "$@" "$corpus" >>"$log" 2>&1 || rc=$?
  took=$(($(date +%s) - start))
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | cut -d' ' -f2)
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -n 1 | cut -d' ' -f2)
  files=$(ls "$corpus" | wc -l)
  if [ "$rc" -ne 0 ]; then
    crash=$(ls "$artifacts" | head -n 1)
    echo "$target: CRASH after ${took}s (exit $rc): input $artifacts/$crash; output in $log"
    grep -m 3 -E 'ERROR: |runtime error|invariant broken' "$log" | sed 's/^/  /' || true
    failed=1
  else
    echo "$target: ${runs:-?} runs in ${took}s, cov ${cov:-?}, ft ${ft:-?}, corpus ${files} files"
  fi
done
exit "$failed"
