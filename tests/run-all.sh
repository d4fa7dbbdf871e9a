#!/bin/sh
# Runs every test of headroom: installs the build dependencies (root), builds
# with warnings as errors, runs the whole suite (unit and integration tiers),
# then builds again with AddressSanitizer + UBSan and runs the suite once more.
#
#   sudo tests/run-all.sh            # everything
#   tests/run-all.sh --no-deps       # skip apt-get (dependencies already there)
#   tests/run-all.sh --no-sanitize   # skip the sanitizer pass
set -eu
cd "$(dirname "$0")/.."
deps=1 sanitize=1
for arg in "$@"; do
  case "$arg" in
    --no-deps) deps=0 ;;
    --no-sanitize) sanitize=0 ;;
    *) echo "usage: $0 [--no-deps] [--no-sanitize]" >&2; exit 64 ;;
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

jobs=$(nproc)
pass() {
  dir=$1; shift
  echo "=== build $dir ($*)"
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHEADROOM_WERROR=ON "$@" >/dev/null
  cmake --build "$dir" -j"$jobs"
  echo "=== test $dir"
  (cd "$dir" && ctest --output-on-failure -j"$jobs" --timeout 600)
}
pass build
if [ "$sanitize" = 1 ]; then
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    pass build-sanitize -DHEADROOM_SANITIZE=ON -DHEADROOM_BUILD_BENCH=OFF
fi
