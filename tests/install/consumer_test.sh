#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The consumer library as another project sees it: install into a scratch
# prefix, then compile and run a program that finds headroom-orca through
# pkg-config only, and have it read a report that headroomd --once wrote.
# Usage: consumer_test.sh BUILD_DIR SOURCE_DIR [EXTRA_CFLAGS]
# EXTRA_CFLAGS carries the sanitizer flags of a sanitized build: a program that
# loads an ASan-instrumented library must be built with ASan too.
set -eu
build=$1
src=$2
extra=${3:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build/orca" --prefix "$work/prefix" >/dev/null  # the library, headers, .proto and .pc only
export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig:$work/prefix/lib/$(gcc -print-multiarch)/pkgconfig"
pkg-config --exists headroom-orca || { echo "FAIL: pkg-config does not find headroom-orca"; exit 1; }
test -f "$work/prefix/share/headroom/proto/xds/data/orca/v3/orca_load_report.proto" || { echo "FAIL: .proto not installed"; exit 1; }
cat > "$work/consumer.cc" <<'CC'
#include <cstdio>
#include <headroom/orca/report.h>
int main(int argc, char** argv) {
  if (argc != 2) return 2;
  auto r = headroom::orca::read_report_file(argv[1]);
  if (!r) { std::fprintf(stderr, "%s\n", r.error().message.c_str()); return 1; }
  auto md = headroom::orca::metadata_of(*r);
  std::printf("seq=%llu cpu=%.3f\n", static_cast<unsigned long long>(md ? md->seq : 0), r->cpu_utilization());
  return md ? 0 : 1;
}
CC
# shellcheck disable=SC2046
g++ -std=c++20 $extra -o "$work/consumer" "$work/consumer.cc" $(pkg-config --cflags --libs headroom-orca) \
  -Wl,-rpath,"$(pkg-config --variable=libdir headroom-orca)"
printf '' > "$work/empty.toml"
"$build/agent/headroomd" --config "$work/empty.toml" --once --orca-dir "$work/orca" 2>/dev/null
out=$("$work/consumer" "$work/orca/node.orca")
echo "consumer: $out"
case "$out" in seq=1\ cpu=*) echo "PASS" ;; *) echo "FAIL: unexpected output"; exit 1 ;; esac
