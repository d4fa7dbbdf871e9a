#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Installs what building and testing headroom needs, from Debian's packages, and
# grpc-js from the npm registry (install-grpc-js.sh), a test's client.
# Idempotent; needs root (apt-get).
set -eu
if [ "$(id -u)" -ne 0 ]; then
  echo "install-build-deps.sh: run as root (sudo $0)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends \
  ca-certificates cmake g++ make pkgconf \
  protobuf-compiler libprotobuf-dev \
  libspdlog-dev libfmt-dev \
  libsystemd-dev libbpf-dev clang llvm bpftool libclang-rt-14-dev \
  libcli11-dev libtomlplusplus-dev \
  libgtest-dev libgmock-dev \
  python3-protobuf nginx-light wrk \
  systemd systemd-container debootstrap \
  rpm lintian dpkg-dev file fakeroot \
  ccache universal-ctags \
  prometheus-cpp-dev libmicrohttpd-dev prometheus prometheus-node-exporter python3-yaml \
  podman runc \
  libgrpc++-dev protobuf-compiler-grpc python3-grpcio \
  nghttp2-server nghttp2-client python3-h2 \
  redis-server redis-tools \
  nlohmann-json3-dev libcurl4-openssl-dev
# clang, llvm (llvm-strip) and bpftool build the eBPF programs; clang with
# libclang-rt-14-dev (libFuzzer's runtime, only recommended by clang) builds
# the fuzz targets (tests/fuzz/); nginx-light
# and wrk are a third-party server and load generator for the eBPF tests and
# benchmarks. The two lines before ccache are for the packaging tests (tests/packaging/): systemd
# for systemd-analyze, systemd-container + debootstrap to boot a real systemd
# in a container, rpm (rpmbuild for CPack, rpm -qp checks), lintian, dpkg-dev
# (dpkg-shlibdeps for CPACK_DEBIAN_PACKAGE_SHLIBDEPS) and file (CPack's strip step).
# ccache keeps compiled objects between runs of tests/run-all.sh (CI included);
# universal-ctags measures function lengths for tests/tree/check_tree.py.
# prometheus-cpp-dev (the text exposition) and libmicrohttpd-dev (the HTTP
# server) build the Prometheus publisher; prometheus (the server and
# promtool), prometheus-node-exporter and python3-yaml are the real consumers
# its tests run (tests/prometheus/, tests/packaging/); podman and runc build
# and run the Kubernetes image (tests/packaging/image_test.sh).
# libgrpc++-dev and protobuf-compiler-grpc (grpc_cpp_plugin) build the
# out-of-band ORCA service (orca/grpc/); python3-grpcio is the independent
# client its tests stream with (tests/oob/), and the gRPC server and client
# of the HTTP/2 endpoint tests (tests/http2/), with nghttp2-server (nghttpd)
# and nghttp2-client (h2load): a real HTTP/2 server and load generator;
# python3-h2 is another HTTP/2 implementation (its own HPACK encoder).
# redis-server and redis-tools (redis-cli) are the generic request/response
# dependency the dependency probe's tests call (tests/integration/).
# libcurl4-openssl-dev: headroomctl tune recommend's HTTP GETs (Prometheus'
# API, headroomd's /metrics); the runtime library comes in through shlibdeps.
# Node.js and npm run grpc-js, the weighted_round_robin client of
# tests/oob/wrr_test.py. Only when missing: a machine with NodeSource's
# nodejs (which bundles npm and conflicts with Debian's npm) keeps its own.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  apt-get install -y -q --no-install-recommends nodejs npm
fi
"$(dirname "$0")/install-grpc-js.sh"
