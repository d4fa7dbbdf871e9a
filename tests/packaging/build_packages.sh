#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Builds the .deb and .rpm from a build tree into OUT with CPack, as
# `cmake --build BUILD -t packages` does, and prints their paths.
#   build_packages.sh BUILD_DIR OUT_DIR
# With $HEADROOM_PACKAGES naming a directory that holds them (CTest sets it
# for the packaging tests: the fixture packaging.BuildPackages builds them
# once per run into BUILD_DIR/packages), copies those instead of building.
set -eu
build=$1 out=$2
. "$(dirname "$0")/lib.sh"
mkdir -p "$out"
shared=${HEADROOM_PACKAGES:-}
if [ -n "$shared" ] && [ "$(cd "$shared" 2>/dev/null && pwd)" != "$(cd "$out" && pwd)" ] &&
  ls "$shared"/*.deb "$shared"/*.rpm >/dev/null 2>&1; then
  cp "$shared"/*.deb "$shared"/*.rpm "$out"/
else
  need cpack
  rm -f "$out"/*.deb "$out"/*.rpm
  # cpack writes its staging tree under -B, so parallel callers do not collide.
  cpack -G "DEB;RPM" --config "$build/CPackConfig.cmake" -B "$out" >"$out/cpack.log" 2>&1 ||
    { cat "$out/cpack.log" >&2; exit 1; }
fi
ls "$out"/*.deb "$out"/*.rpm
