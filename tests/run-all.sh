#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Runs every test of headroom: installs the build dependencies (root), builds
# with warnings as errors, runs the whole suite (unit and integration tiers),
# then builds again with AddressSanitizer + UBSan and runs the suite once more,
# and last runs every fuzz target for a few seconds (tests/fuzz/, clang's libFuzzer).
#
#   sudo tests/run-all.sh            # everything
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
    echo "tests/run-all.sh: installing dependencies needs root: sudo $0 (or --no-deps)" >&2
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
  export CCACHE_DIR="$HEADROOM_CACHE_DIR/ccache" CCACHE_BASEDIR="$(pwd)" CCACHE_NOHASHDIR=1 \
    CCACHE_SLOPPINESS=file_macro,include_file_mtime,include_file_ctime,time_macros CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-4G}
  launcher="-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache"
  ccache -z >/dev/null
else
  echo "NOTE: ccache is not installed; every run compiles from scratch." >&2
fi

jobs=$(nproc)
start=$(date +%s)
elapsed() { echo "$(($(date +%s) - start)) s"; }
pass() {
  dir=$1; shift
  echo "=== build $dir ($*) at $(elapsed)"
  # shellcheck disable=SC2086 # $launcher is two words or none
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHEADROOM_WERROR=ON $launcher "$@" >/dev/null
  cmake --build "$dir" -j"$jobs"
  if [ -n "$launcher" ]; then ccache -s | grep -E 'Hits|Misses' | tr -s ' ' | sed 's/^/ccache: /'; ccache -z >/dev/null; fi
  echo "=== test $dir at $(elapsed)"
  (cd "$dir" && ctest --output-on-failure -j"$jobs" --timeout 600)
}
pass build
if [ "$sanitize" = 1 ]; then
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    pass build-sanitize -DHEADROOM_SANITIZE=ON -DHEADROOM_BUILD_BENCH=OFF
fi
# Fuzzing: every target of tests/fuzz/ replays its regressions, then fuzzes
# for $HEADROOM_FUZZ_SECONDS (default 12) seconds; docs/fuzzing.md. It needs
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
    # shellcheck disable=SC2086 # $launcher is two words or none
    CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHEADROOM_WERROR=ON \
      -DHEADROOM_FUZZ=ON $launcher >/dev/null
    cmake --build build-fuzz -j"$jobs"
    if [ -n "$launcher" ]; then ccache -s | grep -E 'Hits|Misses' | tr -s ' ' | sed 's/^/ccache: /'; ccache -z >/dev/null; fi
    echo "=== fuzz build-fuzz at $(elapsed)"
    tests/fuzz/run.sh build-fuzz "${HEADROOM_FUZZ_SECONDS:-12}"
  elif [ "${CI:-}" = true ]; then
    echo "FAIL: the fuzz pass needs clang++ with libFuzzer (packaging/install-build-deps.sh installs clang and libclang-rt-14-dev)" >&2
    exit 1
  else
    echo "WARNING: SKIPPING the fuzz pass: clang++ cannot link -fsanitize=fuzzer (install clang and libclang-rt-14-dev, or pass --no-fuzz)" >&2
  fi
fi
echo "=== all tests passed in $(elapsed)"
