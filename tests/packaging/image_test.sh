#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The container image, built and run as the DaemonSet runs it, without a
# registry: a debian:12-slim stand-in is debootstrapped once (minbase
# bookworm, the rootfs tarball cached under ${HEADROOM_CACHE_DIR:-BUILD_DIR}/image-base)
# and imported into a private podman store; packaging/kubernetes/build-image.sh
# builds the Containerfile on it from the project's .deb (the build's RUN
# reaches Debian's mirror on the host network); then, with headroom.yaml's
# securityContext and mounts (uid 9446, drop ALL + BPF and PERFMON,
# no_new_privs, seccomp = podman's default profile plus bpf() and
# perf_event_open() (see below), read-only root, node /proc and /sys read-only at /host,
# /run/orca read-write, the ConfigMap's headroom.toml plus one [[endpoint]],
# its own network namespace): the init container chowns /run/orca, headroomd
# runs as 9446 with CapEff = BPF+PERFMON from its file capabilities, attaches
# the eBPF endpoint probe and counts the requests of a server in the host's
# network namespace, writes node.orca, serves /metrics, and on `podman stop`
# exits 0 with its final report.
# runc, not crun: crun refuses hosts whose cgroup v2 hierarchy holds
# controllers beside cgroup v1 ("hybrid mode"), and runc is what the README's
# capability reasoning is about (containerd, CRI-O).
# Everything podman keeps goes to a temporary store (storage.conf and
# containers.conf through CONTAINERS_STORAGE_CONF/CONTAINERS_CONF); the
# machine's own configuration is not used or changed.
#   image_test.sh BUILD_DIR SOURCE_DIR
set -eu
build=$(cd "$1" && pwd) src=$(cd "$2" && pwd)
. "$src/tests/packaging/lib.sh"
need cpack debootstrap podman runc python3 dpkg-deb nsenter tar md5sum
need_root
if ! python3 -c 'import yaml' 2>/dev/null; then
  [ "${CI:-}" = true ] && fail "python3-yaml is missing (CI=true)"
  echo "SKIP: python3-yaml is missing" >&2
  exit 77
fi
headroomctl=$build/agent/headroomctl
tools=$build/tests/tools
name=headroom-image-test-$$
image=localhost/$name:test
work=$(mktemp -d "$build/image-test.XXXXXX")
building='' srv='' run_cleanup=''
cleanup() {
  if [ -n "$run_cleanup" ]; then
    # Only the private store's containers and images: the base, the image,
    # the build's intermediate layers.
    podman rm -af -t 0 >/dev/null 2>&1 || true
    podman rmi -af >/dev/null 2>&1 || true
  fi
  if [ -n "$srv" ]; then kill "$srv" 2>/dev/null || true; wait "$srv" 2>/dev/null || true; fi
  if [ -n "$building" ]; then rm -rf "$building"; fi
  # The store's overlay mounts are gone with its containers; never delete
  # through a mount that is left.
  if grep -q " $work/" /proc/self/mountinfo; then
    echo "image_test.sh: mounts left under $work, not removed" >&2
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# A private podman: its own store, run, tmp and network-config dirs, no
# systemd (cgroupfs, events to a file), runc. No network is made: the build
# runs on the host's network, the container in one of its own (none).
mkdir -p "$work/storage" "$work/run" "$work/tmp" "$work/net"
cat >"$work/storage.conf" <<EOF
[storage]
driver = "${HEADROOM_PODMAN_DRIVER:-overlay}"
graphroot = "$work/storage"
runroot = "$work/run"
EOF
cat >"$work/containers.conf" <<EOF
[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "$work/events.log"
tmp_dir = "$work/tmp"
runtime = "runc"
[network]
network_config_dir = "$work/net"
EOF
CONTAINERS_STORAGE_CONF=$work/storage.conf CONTAINERS_CONF=$work/containers.conf
export CONTAINERS_STORAGE_CONF CONTAINERS_CONF
run_cleanup=1

"$src/tests/packaging/build_packages.sh" "$build" "$work/out" >/dev/null
deb=$(ls "$work"/out/headroom_*_amd64.deb)
version=$(dpkg-deb -f "$deb" Version | sed 's/-[^-]*$//')

# --- the base image: Debian 12 minbase, as debian:12-slim is; the tarball
# is cached by mirror, built under a temporary name and renamed.
mirror=$(debian_mirror)
caches=${HEADROOM_CACHE_DIR:-$build}/image-base
key=$(printf 'bookworm minbase %s' "$mirror" | md5sum | cut -c1-12)
cache=$caches/$key
if [ ! -e "$cache/done" ]; then
  building=$caches/.$key.$$
  echo "debootstrap --variant=minbase bookworm from $mirror (once; cached in $cache)"
  rm -rf "$building"
  mkdir -p "$building"
  debootstrap --variant=minbase bookworm "$building/rootfs" "$mirror" >"$building/debootstrap.log" 2>&1 ||
    { tail -n 30 "$building/debootstrap.log" >&2; fail "debootstrap"; }
  # What debian:12-slim leaves out too: apt's lists and the package cache.
  rm -rf "$building"/rootfs/var/lib/apt/lists/* "$building"/rootfs/var/cache/apt/*.bin "$building"/rootfs/var/cache/apt/archives/*.deb
  tar --numeric-owner --xattrs -C "$building/rootfs" -cf "$building/rootfs.tar" . || fail "tar of the base rootfs"
  rm -rf "$building/rootfs"
  touch "$building/done"
  rm -rf "$cache"
  mv "$building" "$cache"
  building=
  find "$caches" -mindepth 1 -maxdepth 1 ! -name "$key" ! -name '.*' -exec rm -rf {} +
fi
# The Containerfile's FROM debian:12-slim is docker.io/library/debian:12-slim;
# with --pull=never podman takes it from the store and never asks a registry.
podman import -q "$cache/rootfs.tar" docker.io/library/debian:12-slim >/dev/null || fail "podman import of the base"
echo "base image: docker.io/library/debian:12-slim imported from $cache/rootfs.tar"

# --- the build, with the project's script: a context holding the .deb only.
BUILD_ARGS='--pull=never --network=host' "$src/packaging/kubernetes/build-image.sh" "$work/out" "$image" \
  >"$work/build.log" 2>&1 || { tail -n 40 "$work/build.log" >&2; fail "build-image.sh"; }
[ "$(podman image inspect --format '{{.Config.User}}' "$image")" = 9446:9446 ] || fail "image USER is not 9446:9446"
[ "$(podman image inspect --format '{{index .Config.Labels "org.opencontainers.image.version"}}' "$image")" = "$version" ] ||
  fail "image version label is not $version"
echo "image built: $image (USER 9446:9446, version $version)"

# --- the ConfigMap's headroom.toml with one endpoint, on a server in the
# host's network namespace (the container has its own).
"$tools/hr-test-server" --port 0 --delay /=2ms >"$work/server.out" 2>&1 &
srv=$!
i=0
until port=$(sed -n 's/^port=//p' "$work/server.out") && [ -n "$port" ]; do
  kill -0 "$srv" 2>/dev/null || fail "hr-test-server exited: $(cat "$work/server.out")"
  [ $i -lt 50 ] || fail "hr-test-server printed no port"
  sleep 0.1; i=$((i + 1))
done
mkdir -p "$work/etc"
python3 - "$src/packaging/kubernetes/headroom.yaml" "$work/etc/headroom.toml" "$port" <<'EOF'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
cm = [d for d in docs if d["kind"] == "ConfigMap"][0]
with open(sys.argv[2], "w") as f:
    f.write(cm["data"]["headroom.toml"])
    f.write('\n[[endpoint]]\nname = "web"\nport = %s\ntarget = "10ms"\nmax = "200ms"\n' % sys.argv[3])
EOF
chmod 644 "$work/etc/headroom.toml"
grep -q '^orca_dir = "/run/orca"$' "$work/etc/headroom.toml" || fail "the ConfigMap's orca_dir is not /run/orca"

# --- the pod: /run/orca as the kubelet makes a missing hostPath
# (root:root 0755), the init container's chown (uid 0, CHOWN only), then
# headroomd with the DaemonSet's securityContext and mounts. Explicit limits:
# rootful podman's defaults (nofile 1048576, nproc) are set by runc after the
# capabilities are dropped, which fails ("error setting rlimits", EPERM)
# wherever the caller's hard limits are lower; --ulimit host does not help.
nofile=$(awk '/^Max open files/ { print $5 }' /proc/self/limits)
orca=$work/orca
mkdir -m 0755 "$orca"
chown 0:0 "$orca"
podman run --rm --name "$name-init" --network=none --ulimit "nofile=$nofile:$nofile" --ulimit nproc=4096:4096 --user 0:0 --cap-drop=ALL --cap-add=CHOWN \
  --security-opt no-new-privileges --read-only -v "$orca:/run/orca" \
  --entrypoint chown "$image" 9446:9446 /run/orca >"$work/init.log" 2>&1 ||
  { cat "$work/init.log" >&2; fail "init container (chown with CHOWN only)"; }
[ "$(stat -c '%u:%g %a' "$orca")" = "9446:9446 755" ] || fail "/run/orca after the init container: $(stat -c '%u:%g %a' "$orca")"
echo "init container: /run/orca chowned to 9446:9446 (0755) with CHOWN only"

# seccomp: podman's default profile (CRI-O's too: both are containers-common's)
# allows bpf() and perf_event_open() only with CAP_SYS_ADMIN, so under it the
# kernel refuses the probe (EPERM) although CapEff holds BPF and PERFMON.
# The README's remedy, a Localhost profile: the default with those two
# calls allowed, made here from the profile podman would apply.
profile=$(podman info --format '{{.Host.Security.SECCOMPProfilePath}}')
python3 - "$profile" "$work/seccomp.json" <<'EOF'
import json, sys
prof = json.load(open(sys.argv[1]))
calls = {"bpf", "perf_event_open"}
rules = []
for r in prof["syscalls"]:
    r["names"] = [n for n in r["names"] if n not in calls]
    if r["names"]:
        rules.append(r)
rules.append({"names": sorted(calls), "action": "SCMP_ACT_ALLOW"})
prof["syscalls"] = rules
json.dump(prof, open(sys.argv[2], "w"))
EOF
podman run -d --name "$name" --network=none --ulimit "nofile=$nofile:$nofile" --ulimit nproc=4096:4096 --user 9446:9446 --cap-drop=ALL --cap-add=BPF,PERFMON \
  --security-opt no-new-privileges --security-opt "seccomp=$work/seccomp.json" --read-only \
  -v /proc:/host/proc:ro -v /sys:/host/sys:ro -v "$orca:/run/orca" \
  -v "$work/etc/headroom.toml:/etc/headroom/headroom.toml:ro" \
  "$image" >"$work/run.log" 2>&1 || { cat "$work/run.log" >&2; fail "podman run"; }
logs() { podman logs "$name" 2>&1; }
within() {
  t=$1; shift; i=0
  until eval "$*"; do
    [ $i -lt $((t * 10)) ] || return 1
    sleep 0.1; i=$((i + 1))
  done
}
within 20 'logs | grep -q "eBPF endpoint probe attached"' || { logs >&2; fail "no 'eBPF endpoint probe attached' in the log"; }
pid=$(podman inspect --format '{{.State.Pid}}' "$name")
[ "$(cat "/proc/$pid/comm")" = headroomd ] || fail "the container's process is $(cat "/proc/$pid/comm"), not headroomd"
status=$(cat "/proc/$pid/status")
echo "$status" | grep -q '^Uid:[[:space:]]*9446[[:space:]]9446[[:space:]]9446[[:space:]]9446$' || fail "uid: $(echo "$status" | grep '^Uid:')"
echo "$status" | grep -q '^Gid:[[:space:]]*9446[[:space:]]9446[[:space:]]9446[[:space:]]9446$' || fail "gid: $(echo "$status" | grep '^Gid:')"
expect=$(printf '%016x' $(((1 << 38) | (1 << 39)))) # CAP_PERFMON=38, CAP_BPF=39
echo "$status" | grep -q "^CapEff:[[:space:]]*$expect\$" || fail "CapEff is not BPF+PERFMON: $(echo "$status" | grep '^Cap')"
echo "$status" | grep -q "^CapBnd:[[:space:]]*$expect\$" || fail "CapBnd is not BPF+PERFMON: $(echo "$status" | grep '^Cap')"
echo "$status" | grep -q '^NoNewPrivs:[[:space:]]*1$' || fail "no_new_privs is not set"
echo "$status" | grep -q '^Seccomp:[[:space:]]*2$' || fail "no seccomp filter"
echo "headroomd: PID $pid, uid/gid 9446, CapEff=CapBnd=$expect (BPF+PERFMON), NoNewPrivs 1, seccomp filtered, eBPF endpoint probe attached"
if logs | grep -q 'endpoint latency signals unavailable'; then logs >&2; fail "eBPF unavailable in the container"; fi

within 10 '[ -f "$orca/node.orca" ]' || { logs >&2; fail "no node.orca in /run/orca"; }
"$headroomctl" cat --json "$orca/node.orca" >"$work/node.json" || fail "headroomctl cannot read node.orca: $(cat "$work/node.json")"
grep -q '"stale":false' "$work/node.json" || fail "node.orca is stale: $(cat "$work/node.json")"
[ "$(stat -c '%u %a' "$orca/node.orca")" = "9446 644" ] || fail "node.orca is $(stat -c '%u %a' "$orca/node.orca")"
echo "node.orca: written by 9446 (0644), fresh, read by headroomctl"

"$tools/hr-test-load" --port "$port" --connections 2 --duration 3s --rate 200 >"$work/load.json" ||
  fail "hr-test-load: $(cat "$work/load.json")"
sent=$(grep -o '"requests":[0-9]*' "$work/load.json" | head -n 1 | grep -o '[0-9]*$')
# Requests still in flight when --duration ended are answered by the server
# (and counted by headroomd) after the client stopped counting.
outstanding=$(grep -o '"outstanding":[0-9]*' "$work/load.json" | head -n 1 | grep -o '[0-9]*$')
# /metrics in the container's own network namespace, as the kubelet's probes
# and Prometheus reach it on the pod IP.
scrape() {
  nsenter -t "$pid" -n python3 -c 'import sys, urllib.request
sys.stdout.write(urllib.request.urlopen("http://127.0.0.1:9446/metrics", timeout=2).read().decode())'
}
counted() { scrape 2>/dev/null | sed -n 's/^headroom_endpoint_requests_total{endpoint="web"} //p'; }
counted_all() { n=$(counted); [ -n "$n" ] && [ "$n" -ge "$sent" ] && [ "$n" -le $((sent + outstanding)) ]; }
within 5 counted_all ||
  fail "/metrics counted $(counted) requests of $sent answered and $outstanding in flight at the end: $(scrape 2>&1 | grep endpoint_requests)"
scrape | grep -q '^headroom_ebpf_available 1$' || fail "/metrics: $(scrape | grep ebpf_available)"
"$headroomctl" cat --json "$orca/endpoint.web.orca" >"$work/endpoint.json" || fail "cannot read endpoint.web.orca"
if grep -q 'headroom.ebpf.unavailable' "$work/endpoint.json"; then fail "endpoint.web.orca says eBPF is unavailable"; fi
echo "/metrics in the pod's network namespace: headroom_ebpf_available 1, endpoint web counted $(counted) of $sent requests answered and $outstanding in flight at the end"

podman stop -t 5 "$name" >/dev/null || fail "podman stop"
code=$(podman inspect --format '{{.State.ExitCode}}' "$name")
[ "$code" = 0 ] || { logs >&2; fail "headroomd exited $code on SIGTERM"; }
"$headroomctl" cat --json "$orca/node.orca" >"$work/final.json" || fail "cannot read the final node.orca"
grep -q '"headroom.stopped":1' "$work/final.json" || fail "final node.orca lacks headroom.stopped = 1: $(cat "$work/final.json")"
echo "podman stop: exit 0, final node.orca says headroom.stopped = 1"
echo PASS
