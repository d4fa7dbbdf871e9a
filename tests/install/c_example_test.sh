#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The C interface as an outside C program sees it.
#   c_example_test.sh installed BUILD_DIR SOURCE_DIR
#     installs into a scratch prefix, compiles examples/c/read_reports.c with
#     the C compiler and nothing but `pkg-config --cflags --libs headroom-orca`
#     (no C++ flags, no -lstdc++ by hand), and runs it on a report that
#     headroomd --once wrote.
#   c_example_test.sh built BUILD_DIR SOURCE_DIR EXAMPLE
#     runs the example the build compiled against the build tree.
set -eu
mode=$1
build=$2
src=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

case "$mode" in
installed)
  # Only orca/: the library, its headers and its .pc are all a consumer gets
  # from the -dev package, and the rest of the tree need not be built.
  cmake --install "$build/orca" --prefix "$work/prefix" >/dev/null
  export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig:$work/prefix/lib/$(gcc -print-multiarch)/pkgconfig"
  pkg-config --exists headroom-orca || { echo "FAIL: pkg-config does not find headroom-orca"; exit 1; }
  test -f "$work/prefix/include/headroom/orca/headroom_orca.h" || { echo "FAIL: headroom_orca.h not installed"; exit 1; }
  # shellcheck disable=SC2046
  # HEADROOM_EXTRA_CFLAGS: a sanitized build's flags (a program loading an
  # ASan-instrumented library must itself be built with ASan).
  # shellcheck disable=SC2086
  cc -std=c99 -Wall -Wextra -pedantic -Werror ${HEADROOM_EXTRA_CFLAGS:-} -o "$work/read_reports" "$src/examples/c/read_reports.c" \
    $(pkg-config --cflags --libs headroom-orca) -Wl,-rpath,"$(pkg-config --variable=libdir headroom-orca)"
  example="$work/read_reports"
  ;;
built)
  example=$4
  ;;
*)
  echo "usage: $0 installed|built BUILD_DIR SOURCE_DIR [EXAMPLE]" >&2
  exit 2
  ;;
esac

printf '' > "$work/empty.toml"
"$build/agent/headroomd" --config "$work/empty.toml" --once --orca-dir "$work/orca" 2>/dev/null
out=$("$example" "$work/orca")
echo "$out"
echo "$out" | grep -Eq '^node +seq=1 app=[0-9.]+ cpu=[0-9.]+ mem=[0-9.]+.* age=-?[0-9]+ms (fresh|STALE)' \
  || { echo "FAIL: no node line"; exit 1; }

# -e: this process's own instance of an endpoint; headroomd --once with no
# [[endpoint]] wrote none, and the line says what was looked for.
if own=$("$example" -e api "$work/orca"); then echo "FAIL: exit 0 without an instance report"; exit 1; fi
echo "$own"
echo "$own" | grep -q "^api .*no instance here: no report of an instance of endpoint api in this process's network namespace, net:\[[0-9]*\]" \
  || { echo "FAIL: no line saying which namespace was looked for"; exit 1; }

# A missing directory is not an error for the reader; no reports is (exit 1).
if "$example" "$work/absent" >/dev/null 2>&1; then echo "FAIL: exit 0 without reports"; exit 1; fi
echo "PASS"
