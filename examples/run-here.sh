#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Sets everything up and runs headroom on this machine: installs the build
# dependencies, builds, starts headroomd publishing into /run/orca with the
# example configuration, and shows what it publishes with `headroomctl watch`.
# Ctrl-C stops both. Extra arguments go to `headroomctl watch` (e.g. --count 5).
# To also measure a server on this machine with eBPF, name it as an endpoint:
#   HEADROOM_ENDPOINT='name=web,port=80,target=10ms,max=500ms' examples/run-here.sh
set -eu
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
  exec sudo HEADROOM_ENDPOINT="${HEADROOM_ENDPOINT:-}" "$0" "$@"
fi
packaging/install-build-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" --target headroomd headroomctl

if [ -n "${HEADROOM_ENDPOINT:-}" ]; then
  build/agent/headroomd --config examples/headroom.toml --orca-dir /run/orca --endpoint "$HEADROOM_ENDPOINT" &
else
  build/agent/headroomd --config examples/headroom.toml --orca-dir /run/orca &
fi
daemon=$!
trap 'kill -TERM $daemon 2>/dev/null; wait $daemon 2>/dev/null || true' EXIT INT TERM
echo "headroomd (pid $daemon) publishes into /run/orca; decode a report with: build/agent/headroomctl cat /run/orca/node.orca"
sleep 0.5
build/agent/headroomctl watch /run/orca "$@"
