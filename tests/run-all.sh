#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Runs every test of headroom: installs the build dependencies (root), builds
# with warnings as errors and runs the whole suite (unit, integration, fault
# and packaging tiers); builds again with AddressSanitizer + UBSan what the
# tests labelled `sanitize` need (the unit tier and the integration tests of
# memory-heavy paths that do not measure the machine) and runs those; last
# every fuzz target for a few seconds (tests/fuzz/, clang's libFuzzer), two
# at a time, niced. The packaging tier (containers; it
# measures nothing) runs beside the sanitizer and fuzz builds, which are
# niced. Prints how long each phase took.
#
#   tests/run-all.sh                 # everything, as root (or with sudo)
#   tests/run-all.sh --no-deps       # skip apt-get (dependencies already there)
#   tests/run-all.sh --no-sanitize   # skip the sanitizer pass
#   tests/run-all.sh --no-fuzz       # skip the fuzz pass
#
# Compilation is cached across runs and clones with ccache, in
# $HEADROOM_CACHE_DIR (default /var/cache/headroom-build as root, else
# ~/.cache/headroom-build), outside the source tree; so is the Debian root
# the packaging test boots. Delete that directory to start cold.
set -eu
cd "$(dirname "$0")/.."
deps=1 sanitize=1 fuzz=1
for arg in "$@"; do
  case "$arg" in
    --no-deps) deps=0 ;;
    --no-sanitize) sanitize=0 ;;
    --no-fuzz) fuzz=0 ;;
    *) echo "usage: $0 [--no-deps] [--no-sanitize] [--no-fuzz]" >&2; exit 64 ;;
  esac
done
if [ "$deps" = 1 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "tests/run-all.sh: installing dependencies needs root: run it as root, or with sudo (or pass --no-deps)" >&2
    exit 1
  fi
  packaging/install-build-deps.sh
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "NOTE: not root; tests that switch to an unprivileged user run as $(id -un) instead." >&2
fi

if [ -z "${HEADROOM_CACHE_DIR:-}" ]; then
  if [ "$(id -u)" -eq 0 ]; then HEADROOM_CACHE_DIR=/var/cache/headroom-build
  else HEADROOM_CACHE_DIR=${XDG_CACHE_HOME:-$HOME/.cache}/headroom-build; fi
fi
export HEADROOM_CACHE_DIR
mkdir -p "$HEADROOM_CACHE_DIR"
launcher=
if command -v ccache >/dev/null 2>&1; then
  # The cache key leaves out the clone's folder: paths below the source tree
  # are hashed relative to it (basedir), the build directory is not hashed
  # (nohashdir), and __FILE__ may name the clone that filled the cache
  # (file_macro: only failure messages show it).
  CCACHE_BASEDIR=$(pwd)
  export CCACHE_DIR="$HEADROOM_CACHE_DIR/ccache" CCACHE_BASEDIR CCACHE_NOHASHDIR=1 \
    CCACHE_SLOPPINESS=file_macro,include_file_mtime,include_file_ctime,time_macros CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-4G}"
  launcher="-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache"
  ccache -z >/dev/null
else
  echo "NOTE: ccache is not installed; every run compiles from scratch." >&2
fi

jobs=$(nproc)
start=$(date +%s)
elapsed() { echo "$(($(date +%s) - start)) s"; }
# The breakdown printed at the end: "phase seconds" lines.
phases=
since=
begin() { since=$(date +%s); }
took() { phases="$phases$1: $(($(date +%s) - since)) s
"; }
ccache_stats() {
  if [ -n "$launcher" ]; then ccache -s | grep -E 'Hits|Misses' | tr -s ' ' | sed 's/^/ccache: /'; ccache -z >/dev/null; fi
}
configure() {
  dir=$1; shift
  # shellcheck disable=SC2086 # $launcher is two words or none
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHEADROOM_WERROR=ON $launcher "$@" >/dev/null
}

echo "=== build build at $(elapsed)"
begin
configure build
cmake --build build -j"$jobs"
ccache_stats
took "build"
echo "=== test build (all but the packaging tier) at $(elapsed)"
begin
# With the sanitizer pass, the tests labelled sanitized_run run there only
# (tests/CMakeLists.txt): once, and with memory checks.
exclude=packaging
[ "$sanitize" = 1 ] && exclude='packaging|sanitized_run'
(cd build && ctest --output-on-failure -j"$jobs" --timeout 600 -LE "$exclude")
took "tests"

# The packaging tier, in the background, its output in build/packaging-tests.log.
echo "=== test build (packaging tier, in the background) at $(elapsed)"
pkg_start=$(date +%s)
(cd build && exec ctest --output-on-failure -j"$jobs" --timeout 900 -L packaging) >build/packaging-tests.log 2>&1 &
pkg_pid=$!
fuzz_pid=''
# Whatever still runs in the background when this script ends.
stop_background() {
  for pid in $pkg_pid $fuzz_pid; do kill "$pid" 2>/dev/null || true; done
}
trap stop_background EXIT
packaging_done() {
  rc=0
  wait "$pkg_pid" || rc=$?
  pkg_pid=
  echo "=== packaging tier (started at $((pkg_start - start)) s, done at $(elapsed)):"
  cat build/packaging-tests.log
  phases="${phases}packaging (beside the builds): $(($(date +%s) - pkg_start)) s
"
  [ "$rc" = 0 ] || { echo "FAIL: the packaging tier (build/packaging-tests.log)" >&2; exit 1; }
}

if [ "$sanitize" = 1 ]; then
  echo "=== build build-sanitize (ASan + UBSan; the tests labelled sanitize) at $(elapsed)"
  begin
  configure build-sanitize -DHEADROOM_SANITIZE=ON -DHEADROOM_BUILD_BENCH=OFF
  nice -n 10 cmake --build build-sanitize -j"$jobs" --target sanitize_tests
  ccache_stats
  took "sanitizer build"
fi

# Fuzzing (docs/fuzzing.md; the pass itself is fuzz_pass below). It needs
# clang and its fuzzer runtime (libclang-rt-14-dev): CI must have them, a
# developer's machine may skip the pass, loudly.
fuzz_toolchain() {
  probe=$(mktemp -d)
  printf '%s\n' 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' >"$probe/probe.cc"
  ok=0
  clang++ -fsanitize=fuzzer,address,undefined "$probe/probe.cc" -o "$probe/probe" >/dev/null 2>&1 && ok=1
  rm -rf "$probe"
  [ "$ok" = 1 ]
}
if [ "$fuzz" = 1 ]; then
  if command -v clang++ >/dev/null 2>&1 && fuzz_toolchain; then
    echo "=== build build-fuzz (clang, libFuzzer) at $(elapsed)"
    begin
    CC=clang CXX=clang++ configure build-fuzz -DHEADROOM_FUZZ=ON
    nice -n 10 cmake --build build-fuzz -j"$jobs"
    ccache_stats
    took "fuzz build"
  elif [ "${CI:-}" = true ]; then
    echo "FAIL: the fuzz pass needs clang++ with libFuzzer (packaging/install-build-deps.sh installs clang and libclang-rt-14-dev)" >&2
    exit 1
  else
    echo "WARNING: SKIPPING the fuzz pass: clang++ cannot link -fsanitize=fuzzer (install clang and libclang-rt-14-dev, or pass --no-fuzz)" >&2
    fuzz=0
  fi
fi
packaging_done

# The fuzz pass: every target of tests/fuzz/ replays its regressions, then
# fuzzes for $HEADROOM_FUZZ_SECONDS seconds, two targets at a time (each
# half of the targets in one tests/fuzz/run.sh), after the sanitizer tests
# (which leave out the one test that measures the machine's CPU: it ran in
# the normal build).
fuzz_pass() {
  odd='' even='' n=0
  for src in tests/fuzz/fuzz_*.cc; do
    t=$(basename "$src" .cc)
    if [ $((n % 2)) = 0 ]; then odd="$odd $t"; else even="$even $t"; fi
    n=$((n + 1))
  done
  mkdir -p build-fuzz/fuzz
  frc=0 even_pid=''
  if [ -n "$even" ]; then  # run.sh without targets would run them all
    # shellcheck disable=SC2086 # a list of target names
    nice -n 10 tests/fuzz/run.sh build-fuzz "${HEADROOM_FUZZ_SECONDS:-12}" $even >build-fuzz/fuzz/run-even.out 2>&1 &
    even_pid=$!
  fi
  # shellcheck disable=SC2086
  nice -n 10 tests/fuzz/run.sh build-fuzz "${HEADROOM_FUZZ_SECONDS:-12}" $odd || frc=$?
  if [ -n "$even_pid" ]; then
    wait "$even_pid" || frc=$?
    cat build-fuzz/fuzz/run-even.out
  fi
  return "$frc"
}
if [ "$sanitize" = 1 ]; then
  echo "=== test build-sanitize (-L sanitize) at $(elapsed)"
  begin
  (cd build-sanitize && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --output-on-failure -j"$jobs" --timeout 600 -L sanitize -E '^Headroomd\.CpuUtilization')
  took "sanitizer tests"
fi
if [ "$fuzz" = 1 ]; then
  echo "=== fuzz build-fuzz, two targets at a time, at $(elapsed)"
  fuzz_start=$(date +%s)
  mkdir -p build-fuzz/fuzz
  (fuzz_pass) >build-fuzz/fuzz/all.out 2>&1 &
  fuzz_pid=$!
fi
if [ -n "$fuzz_pid" ]; then
  rc=0
  wait "$fuzz_pid" || rc=$?
  fuzz_pid=''
  echo "=== fuzz (started at $((fuzz_start - start)) s, done at $(elapsed)):"
  cat build-fuzz/fuzz/all.out
  phases="${phases}fuzz: $(($(date +%s) - fuzz_start)) s
"
  [ "$rc" = 0 ] || { echo "FAIL: the fuzz pass (build-fuzz/fuzz/logs/)" >&2; exit "$rc"; }
fi
echo "=== time per phase:"
printf '%s' "$phases" | sed 's/^/  /'
echo "=== all tests passed in $(elapsed)"
