#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Installs grpc-js (@grpc/grpc-js 1.14 and @grpc/proto-loader, as pinned by
# tests/oob/grpc-js/package-lock.json) from the npm registry into
# $HEADROOM_CACHE_DIR/npm (default /var/cache/headroom-build/npm), outside
# the source tree, where tests/oob/wrr_test.py finds it (NODE_PATH). The
# modules stay there between runs and clones; npm only fetches what changed.
# Called by install-build-deps.sh; needs node and npm.
set -eu
src=$(cd "$(dirname "$0")/../tests/oob/grpc-js" && pwd)
dir=${HEADROOM_CACHE_DIR:-/var/cache/headroom-build}/npm
mkdir -p "$dir"
cp "$src/package.json" "$src/package-lock.json" "$dir/"
# No install scripts: none of these packages needs one to work.
cd "$dir" && npm install --no-audit --no-fund --ignore-scripts --loglevel=error
node -e 'console.log("grpc-js " + require(process.argv[1] + "/node_modules/@grpc/grpc-js/package.json").version + " in " + process.argv[1])' "$dir"
