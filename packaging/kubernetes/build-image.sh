#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Builds the headroom container image from a build tree's .deb:
#
#   packaging/kubernetes/build-image.sh [BUILD_DIR [IMAGE]]
#
# BUILD_DIR (default: build) must hold exactly one headroom_*_amd64.deb, made
# by `cmake --build BUILD_DIR -t packages`. IMAGE defaults to
# headroom:<version> (the .deb's upstream version). The build context is a
# temporary directory with that .deb and nothing else (the Containerfile
# copies only it); podman is used if present, else docker. BUILD_ARGS is
# passed on, e.g. BUILD_ARGS='--build-arg HEADROOM_FILE_CAPS=...'.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
build_dir=${1:-build}
image=${2:-}
set -- "$build_dir"/headroom_*_amd64.deb
if [ "$#" -ne 1 ] || [ ! -f "$1" ]; then
  echo "build-image.sh: need exactly one headroom_*_amd64.deb in $build_dir (cmake --build $build_dir -t packages)" >&2
  exit 1
fi
deb=$1
version=$(basename "$deb" | sed -n 's/^headroom_\([^-_]*\)-.*_amd64\.deb$/\1/p')
image=${image:-headroom:$version}

if command -v podman >/dev/null 2>&1; then
  tool=podman
elif command -v docker >/dev/null 2>&1; then
  tool=docker
else
  echo "build-image.sh: neither podman nor docker is installed" >&2
  exit 1
fi

context=$(mktemp -d)
trap 'rm -rf "$context"' EXIT
cp "$deb" "$context/"
# shellcheck disable=SC2086 # BUILD_ARGS is meant to split into words
"$tool" build -f "$here/Containerfile" --build-arg "HEADROOM_VERSION=$version" ${BUILD_ARGS:-} \
  -t "$image" "$context"
echo "built $image from $deb"
