#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Builds the .deb and .rpm from a build tree into OUT with CPack, as
# `cmake --build BUILD -t packages` does, and prints their paths.
#   build_packages.sh BUILD_DIR OUT_DIR
set -eu
build=$1 out=$2
mkdir -p "$out"
# cpack writes its staging tree under -B, so parallel callers do not collide.
cpack -G "DEB;RPM" --config "$build/CPackConfig.cmake" -B "$out" >"$out/cpack.log" 2>&1 ||
  { cat "$out/cpack.log" >&2; exit 1; }
ls "$out"/*.deb "$out"/*.rpm
