#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The .deb under a real systemd: a minimal Debian booted in systemd-nspawn
# (rootfs debootstrapped once, cached in the build tree), the package
# installed with dpkg -i, then: the unit is active, node.orca is a valid
# report, readers can read but not replace it, a rejected reload keeps the
# old configuration, the eBPF endpoint probes load and count requests as
# user headroom, [prometheus] serves /metrics and writes the textfile with
# the packaged drop-in, a stopped daemon is restarted by the watchdog, and
# dpkg --purge leaves nothing behind. Recipe: SYSTEMD-AND-PACKAGING notes
# (private /run tmpfs via unshare, --register=no --keep-unit, own cgroup).
#   nspawn_test.sh BUILD_DIR SOURCE_DIR
set -eu
build=$(cd "$1" && pwd) src=$2
. "$src/tests/packaging/lib.sh"
need cpack debootstrap systemd-nspawn unshare nsenter dpkg-deb
need_root
headroomctl=$build/agent/headroomctl
name=headroom-pkg-test-$$
work=$(mktemp -d "$build/nspawn-test.XXXXXX")
npid= cpid= building=
cleanup() {
  [ -n "$building" ] && rm -rf "$building"
  if [ -n "$npid" ] && kill -0 "$npid" 2>/dev/null; then
    # A clean poweroff first; if the manager cannot take it (not up yet),
    # SIGKILL the container's PID 1, which ends its whole PID namespace.
    # Only then is its root removed.
    [ -n "$cpid" ] && nsenter -t "$cpid" -a systemctl poweroff >/dev/null 2>&1 || true
    i=0
    while kill -0 "$npid" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.2; i=$((i + 1)); done
    [ -n "$cpid" ] && kill -KILL "$cpid" 2>/dev/null || true
    i=0
    while kill -0 "$npid" 2>/dev/null && [ $i -lt 25 ]; do sleep 0.2; i=$((i + 1)); done
    kill -KILL "$npid" 2>/dev/null || true
    wait "$npid" 2>/dev/null || true
  fi
  rm -rf "$work"
  # The container leaves its own cgroups below ours: remove them depth first.
  for h in systemd unified; do
    [ -d "/sys/fs/cgroup/$h/$name" ] && find "/sys/fs/cgroup/$h/$name" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
}
trap cleanup EXIT
trap 'exit 1' INT TERM

"$src/tests/packaging/build_packages.sh" "$build" "$work/out" >/dev/null
deb=$(ls "$work"/out/headroom_*.deb)

# The rootfs: Debian's minimal base with systemd, plus the package's
# dependencies (from its Depends:; apt resolves virtual names such as
# libspdlog1.10-fmt9, which debootstrap cannot), cached by that list.
deps=$(dpkg-deb -f "$deb" Depends | tr ',' '\n' | sed 's/|.*//; s/(.*)//; s/ //g' | grep -v '^$' | sort | tr '\n' ' ')
mirror=$(debian_mirror)
# Cached outside the build tree when tests/run-all.sh names a cache
# directory, so a fresh clone (CI) boots the same root without debootstrap.
# Built under a temporary name and renamed, so runs never see half a root.
caches=${HEADROOM_CACHE_DIR:-$build}/packaging-rootfs
key=$(printf '%s %s' "$deps" "$mirror" | md5sum | cut -c1-12)
cache=$caches/$key
if [ ! -e "$cache/done" ]; then
  building=$caches/.$key.$$
  echo "debootstrap bookworm from $mirror (once; cached in $cache)"
  rm -rf "$building"
  mkdir -p "$building"
  debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus bookworm "$building/rootfs" "$mirror" \
    >"$building/debootstrap.log" 2>&1 || { tail -n 30 "$building/debootstrap.log" >&2; fail "debootstrap"; }
  # shellcheck disable=SC2086 # a list of package names
  chroot "$building/rootfs" sh -c "apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $deps && apt-get clean" \
    >>"$building/debootstrap.log" 2>&1 || { tail -n 30 "$building/debootstrap.log" >&2; fail "apt-get install of the dependencies"; }
  touch "$building/done"
  rm -rf "$cache"
  mv "$building" "$cache"
  building=
  # Roots for other dependency lists are out of date: keep only this one.
  find "$caches" -mindepth 1 -maxdepth 1 ! -name "$key" ! -name '.*' -exec rm -rf {} +
fi
# Each run boots a copy, so the cache stays pristine.
cp -a "$cache/rootfs" "$work/root"
cp "$deb" "$work/root/root/headroom.deb"

# Boot. The launcher gets its own cgroup on both hierarchies; /run on these
# hosts is on disk, which nspawn refuses: a private tmpfs in a private mount
# namespace. CAP_BPF/CAP_PERFMON are granted to the container because the
# unit grants them to headroomd (AmbientCapabilities), and nspawn's own
# seccomp filter is told to let bpf() and perf_event_open() through (on a
# host, only the unit's SystemCallFilter= applies).
for h in systemd unified; do mkdir -p "/sys/fs/cgroup/$h/$name"; done
sh -c "for h in systemd unified; do echo \$\$ > /sys/fs/cgroup/\$h/$name/cgroup.procs; done
  exec unshare --mount --propagation private sh -c 'mount -t tmpfs -o mode=755 tmpfs /run &&
    exec systemd-nspawn --register=no --keep-unit --console=read-only --capability=CAP_BPF,CAP_PERFMON --system-call-filter=bpf --system-call-filter=perf_event_open -D \"$work/root\" -M $name -b'" \
  >"$work/console.log" 2>&1 &
npid=$!

# Polls a shell condition for up to $1 seconds.
within() {
  t=$1; shift; i=0
  until eval "$*"; do
    [ $i -lt $((t * 10)) ] || return 1
    sleep 0.1; i=$((i + 1))
  done
}

# The container's PID 1 is the child of nspawn that is PID 1 in its namespace.
container_pid() {
  for p in $(cat /proc/"$npid"/task/*/children 2>/dev/null); do
    if grep -q '^NSpid:.*[[:space:]]1$' "/proc/$p/status" 2>/dev/null; then echo "$p"; return 0; fi
  done
  return 1
}
i=0
until cpid=$(container_pid); do
  kill -0 "$npid" 2>/dev/null || { cat "$work/console.log" >&2; fail "systemd-nspawn exited"; }
  [ $i -lt 300 ] || fail "no container PID 1 after 30 s"
  sleep 0.1; i=$((i + 1))
done
ct() { nsenter -t "$cpid" -a "$@"; }
# systemctl needs the manager's private socket, which appears a moment after boot.
within 30 '[ -S "/proc/$cpid/root/run/systemd/private" ]' || { cat "$work/console.log" >&2; fail "systemd did not come up"; }
state=$(timeout 60 nsenter -t "$cpid" -a systemctl is-system-running --wait 2>&1 || true)
echo "container booted: $state"
case "$state" in running | degraded) ;; *) cat "$work/console.log" >&2; fail "system state $state" ;; esac

journal() { ct journalctl -u headroomd.service --no-pager -o cat; }
main_pid() { ct systemctl show -P MainPID headroomd.service; }
seq_of() { "$headroomctl" cat --json "/proc/$cpid/root/run/orca/node.orca" | grep -o '"headroom.seq":[0-9]*' | grep -o '[0-9]*$'; }
# --- install: the postinst creates the user, enables and starts the unit.
ct dpkg -i /root/headroom.deb >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log" >&2; fail "dpkg -i"; }
[ "$(ct systemctl is-enabled headroomd.service)" = enabled ] || fail "unit not enabled"
[ "$(ct systemctl is-active headroomd.service)" = active ] || { journal >&2; fail "unit not active"; }
ct getent passwd headroom >/dev/null || fail "no user headroom"
echo "installed: active, enabled"

# --- the report: present, valid (read from the host by the built
# headroomctl, and inside by the packaged one), fresh, owned by headroom.
report=/proc/$cpid/root/run/orca/node.orca
within 10 '[ -f "$report" ]' || fail "no /run/orca/node.orca"
"$headroomctl" cat "$report" >"$work/cat.txt" || fail "host headroomctl cannot read the report: $(cat "$work/cat.txt")"
ct headroomctl cat --json /run/orca/node.orca >"$work/cat.json" || fail "packaged headroomctl cannot read the report"
grep -q '"stale":false' "$work/cat.json" || fail "report is stale: $(cat "$work/cat.json")"
[ "$(ct stat -c '%a %U %G' /run/orca)" = "755 headroom headroom" ] || fail "/run/orca is $(ct stat -c '%a %U %G' /run/orca)"
[ "$(ct stat -c '%a %U' /run/orca/node.orca)" = "644 headroom" ] || fail "node.orca is $(ct stat -c '%a %U' /run/orca/node.orca)"
echo "report: valid, fresh, /run/orca 755 headroom:headroom, node.orca 644"

# --- readers: a member of the headroom group and an ordinary user can read
# the report; neither can replace it or add a file.
ct useradd -M -G headroom reader
ct useradd -M other
for u in reader other; do
  ct runuser -u "$u" -- headroomctl cat /run/orca/node.orca >/dev/null || fail "$u cannot read the report"
  if ct runuser -u "$u" -- sh -c 'echo x > /run/orca/node.orca' 2>/dev/null; then fail "$u overwrote node.orca"; fi
  if ct runuser -u "$u" -- sh -c 'echo x > /run/orca/fake.orca' 2>/dev/null; then fail "$u created a file in /run/orca"; fi
  if ct runuser -u "$u" -- sh -c 'cp /etc/hostname /tmp/n && mv -f /tmp/n /run/orca/node.orca' 2>/dev/null; then
    fail "$u replaced node.orca"
  fi
done
echo "readers: can read, cannot replace"

# --- capabilities and hardening as applied by the real systemd.
pid=$(main_pid)
caps=$(ct grep -E '^Cap(Eff|Amb|Bnd):' "/proc/$pid/status")
expect=$(printf '%016x' $(((1 << 38) | (1 << 39))))  # CAP_PERFMON=38, CAP_BPF=39
for k in CapEff CapAmb CapBnd; do
  echo "$caps" | grep -q "^$k:[[:space:]]*$expect\$" || fail "$k is not CAP_BPF+CAP_PERFMON: $caps"
done
[ "$(ct stat -c %U "/proc/$pid")" = headroom ] || fail "daemon does not run as headroom"
echo "daemon runs as headroom with CAP_BPF CAP_PERFMON only"

# --- the eBPF endpoint probes under the unit's own user and capabilities: an
# endpoint is added and the unit reloaded (SIGHUP loads the probe as user
# headroom with only CAP_BPF CAP_PERFMON); a server inside the container gets
# traffic, and endpoint.web.orca counts it.
port=18089
for t in hr-test-server hr-test-load; do cp "$build/tests/tools/$t" "$work/root/root/$t"; done
ct sh -c "printf '\n[[endpoint]]\nname = \"web\"\nport = $port\ntarget = \"10ms\"\nmax = \"200ms\"\n' >> /etc/headroom/headroom.toml"
ct systemctl reload headroomd.service
within 15 'journal | grep -q "eBPF endpoint probe attached"' ||
  { journal >&2; fail "the eBPF endpoint probe did not attach under the unit"; }
if journal | grep -q "endpoint latency signals unavailable"; then journal >&2; fail "eBPF unavailable under the unit"; fi
ct systemctl show -P StatusText headroomd.service | grep -q "eBPF on" ||
  fail "STATUS= does not say eBPF is on: $(ct systemctl show -P StatusText headroomd.service)"
ct sh -c "/root/hr-test-server --port $port --delay /=2ms >/dev/null 2>&1 &"
within 10 "ct bash -c 'exec 3<>/dev/tcp/127.0.0.1/$port' 2>/dev/null" || fail "test server did not start"
ct sh -c "/root/hr-test-load --port $port --connections 2 --duration 3s >/root/load.json" &
loadpid=$!
sleep 2
"$headroomctl" cat --json "/proc/$cpid/root/run/orca/endpoint.web.orca" >"$work/endpoint.json" ||
  fail "cannot read endpoint.web.orca: $(cat "$work/endpoint.json")"
requests=$(grep -o '"headroom.window.requests":[0-9.e+]*' "$work/endpoint.json" | grep -o '[0-9.e+]*$')
if grep -q 'headroom.ebpf.unavailable' "$work/endpoint.json"; then fail "endpoint report says eBPF is unavailable"; fi
awk -v r="${requests:-0}" 'BEGIN { exit !(r > 50) }' ||
  fail "endpoint.web.orca counted ${requests:-no} requests in its window; report: $(cat "$work/endpoint.json")"
wait "$loadpid" || fail "hr-test-load failed: $(cat "$work/root/root/load.json" 2>/dev/null)"
ct pkill -f hr-test-server || true
echo "eBPF under the unit: probe attached as headroom, endpoint.web.orca counted $requests requests in its window"

# --- [oob] on a unix socket under the unit as shipped (no network): a
# reload starts the listener; headroomctl oob streams the node report and,
# by the endpoint's port as authority, the endpoint's.
ct sed -i -e 's|^listen = \[\]$|listen = ["unix:/run/orca/oob.sock"]|' /etc/headroom/headroom.toml
[ "$(ct grep -c -e '^listen = \["unix:/run/orca/oob.sock"\]$' /etc/headroom/headroom.toml)" = 1 ] ||
  fail "the installed headroom.toml has no [oob] listen = [] to change"
ct systemctl reload headroomd.service
within 10 "ct test -S /run/orca/oob.sock" || { journal | tail -n 20 >&2; fail "no ORCA stream socket after the reload"; }
[ "$(ct stat -c '%a %U' /run/orca/oob.sock)" = "666 headroom" ] || fail "the socket is $(ct stat -c '%a %U' /run/orca/oob.sock)"
ct headroomctl oob unix:/run/orca/oob.sock --interval 100ms --count 3 --json >"$work/oob-node.json" ||
  { journal | tail -n 20 >&2; fail "headroomctl oob on the unix socket: $(cat "$work/oob-node.json")"; }
[ "$(grep -c '"headroom.seq"' "$work/oob-node.json")" = 3 ] || fail "the stream brought: $(cat "$work/oob-node.json")"
grep -q '"headroom.cpu.busy"' "$work/oob-node.json" || fail "the stream without authority is not the node report"
ct headroomctl oob unix:/run/orca/oob.sock --authority "127.0.0.1:$port" --count 1 --json >"$work/oob-web.json" ||
  fail "headroomctl oob with the endpoint's authority: $(cat "$work/oob-web.json")"
grep -q '"headroom.window.requests"' "$work/oob-web.json" || fail "the endpoint's authority got: $(cat "$work/oob-web.json")"
echo "oob under the unit as shipped: unix:/run/orca/oob.sock (666 headroom), node and endpoint streams"

# --- [prometheus] under the unit, with the packaged drop-in: /metrics on
# loopback and node_exporter's textfile, as user headroom; the restart that
# the drop-in needs keeps everything else as it was.
ct mkdir -p /etc/systemd/system/headroomd.service.d /var/lib/prometheus/node-exporter
ct cp /usr/share/doc/headroom/prometheus.conf /etc/systemd/system/headroomd.service.d/prometheus.conf
ct chgrp headroom /var/lib/prometheus/node-exporter
ct chmod 775 /var/lib/prometheus/node-exporter
# The installed file has a [prometheus] table with every key at its default (off).
ct sed -i -e 's|^listen = ""$|listen = "127.0.0.1:9446"|' \
  -e 's|^textfile = ""$|textfile = "/var/lib/prometheus/node-exporter/headroom.prom"|' \
  -e 's|^textfile_interval = "15s"$|textfile_interval = "1s"|' /etc/headroom/headroom.toml
[ "$(ct grep -c -e '^listen = "127.0.0.1:9446"$' -e '^textfile = "/var/lib/prometheus/node-exporter/headroom.prom"$' \
  -e '^textfile_interval = "1s"$' /etc/headroom/headroom.toml)" = 3 ] || fail "the installed headroom.toml has no [prometheus] keys at their defaults"
ct systemctl daemon-reload
ct systemctl restart headroomd.service || { journal | tail -n 20 >&2; fail "the unit did not restart with [prometheus] and the drop-in"; }
[ "$(ct systemctl is-active headroomd.service)" = active ] || { journal >&2; fail "unit not active with [prometheus] and the drop-in"; }
scrape() { ct bash -c 'exec 3<>/dev/tcp/127.0.0.1/9446 && printf "GET /metrics HTTP/1.0\r\n\r\n" >&3 && cat <&3'; }
within 10 'scrape 2>/dev/null | grep -q "^headroom_ticks_total "' ||
  { journal >&2; fail "no /metrics on 127.0.0.1:9446 under the unit: $(scrape 2>&1 | head -n 5)"; }
scrape | grep -q '^headroom_ebpf_available 1$' || fail "/metrics says eBPF is not available under the unit"
scrape | grep -q '^headroom_endpoint_requests_total{endpoint="web"} ' || fail "/metrics lacks the endpoint's counter"
within 10 'ct test -s /var/lib/prometheus/node-exporter/headroom.prom' || { journal >&2; fail "no textfile under the unit"; }
[ "$(ct stat -c '%a %U' /var/lib/prometheus/node-exporter/headroom.prom)" = "644 headroom" ] ||
  fail "the textfile is $(ct stat -c '%a %U' /var/lib/prometheus/node-exporter/headroom.prom)"
ct grep -q '^headroom_build_info{version=' /var/lib/prometheus/node-exporter/headroom.prom || fail "the textfile lacks headroom_build_info"
caps=$(ct grep -E '^CapEff:' "/proc/$(main_pid)/status")
echo "$caps" | grep -q "$expect\$" || fail "the drop-in changed the capabilities: $caps"
echo "prometheus under the unit: /metrics on 127.0.0.1:9446 and the textfile (644 headroom), same capabilities"

# --- [oob] on TCP, with its packaged drop-in (the network), beside the
# unix socket.
ct cp /usr/share/doc/headroom/oob.conf /etc/systemd/system/headroomd.service.d/oob.conf
ct sed -i -e 's|^listen = \["unix:/run/orca/oob.sock"\]$|listen = ["127.0.0.1:9447", "unix:/run/orca/oob.sock"]|' /etc/headroom/headroom.toml
ct systemctl daemon-reload
ct systemctl restart headroomd.service || { journal | tail -n 20 >&2; fail "the unit did not restart with [oob] on TCP and the drop-in"; }
within 10 "ct headroomctl oob 127.0.0.1:9447 --authority 127.0.0.1:$port --count 2 --json >$work/oob-tcp.json 2>&1" ||
  { journal | tail -n 20 >&2; fail "headroomctl oob on 127.0.0.1:9447 under the unit: $(cat "$work/oob-tcp.json")"; }
grep -q '"headroom.window.requests"' "$work/oob-tcp.json" || fail "the TCP stream got: $(cat "$work/oob-tcp.json")"
ct headroomctl oob unix:/run/orca/oob.sock --count 1 >/dev/null || fail "the unix socket stopped answering beside TCP"
caps=$(ct grep -E '^CapEff:' "/proc/$(main_pid)/status")
echo "$caps" | grep -q "$expect\$" || fail "the oob drop-in changed the capabilities: $caps"
echo "oob under the unit with oob.conf: 127.0.0.1:9447 and the unix socket, same capabilities"

# --- reinstall (the upgrade path of the scripts): the daemon is restarted
# on the new files, stays enabled, and a local edit of the conffile survives.
ct sh -c 'echo "# local edit" >> /etc/headroom/headroom.toml'
old=$(main_pid)
ct dpkg -i /root/headroom.deb >"$work/dpkg2.log" 2>&1 || { cat "$work/dpkg2.log" >&2; fail "dpkg -i (again)"; }
[ "$(ct systemctl is-active headroomd.service)" = active ] || fail "unit not active after reinstall"
[ "$(main_pid)" != "$old" ] || fail "reinstall did not restart the daemon"
ct grep -q '^# local edit$' /etc/headroom/headroom.toml || fail "reinstall lost the local conffile edit"
echo "reinstall: restarted (PID $old -> $(main_pid)), conffile edit kept"

# --- a rejected reload: the old configuration keeps running.
pid=$(main_pid)
ct cp /etc/headroom/headroom.toml /root/headroom.toml.orig
ct sh -c 'printf "[agent]\ninterval = \"soon\"\n" > /etc/headroom/headroom.toml'
before=$(seq_of)
ct systemctl reload headroomd.service
within 10 'journal | grep -q "reload rejected"' || { journal >&2; fail "no 'reload rejected' in the journal"; }
sleep 1
[ "$(ct systemctl is-active headroomd.service)" = active ] || fail "unit not active after a rejected reload"
[ "$(main_pid)" = "$pid" ] || fail "the daemon restarted on a rejected reload"
after=$(seq_of)
[ "$after" -gt "$before" ] || fail "seq did not rise after the rejected reload ($before -> $after)"
ct cp /root/headroom.toml.orig /etc/headroom/headroom.toml
ct systemctl reload headroomd.service
echo "rejected reload: still active, same PID, seq $before -> $after"

# --- the watchdog: a stopped daemon is killed and restarted within
# WatchdogSec (5 s) + RestartSec (1 s) + slack.
ct kill -STOP "$pid"
within 20 '[ "$(main_pid)" != "$pid" ] && [ "$(main_pid)" != 0 ] && [ "$(ct systemctl is-active headroomd.service)" = active ]' ||
  { journal >&2; fail "watchdog did not restart the stopped daemon"; }
journal | grep -q -i 'watchdog timeout' || { journal >&2; fail "no watchdog timeout in the journal"; }
new=$(main_pid)
echo "watchdog: PID $pid stopped, restarted as $new"

# --- purge: nothing left behind.
ct dpkg --purge headroom >"$work/purge.log" 2>&1 || { cat "$work/purge.log" >&2; fail "dpkg --purge"; }
for p in /etc/headroom /run/orca /usr/lib/systemd/system/headroomd.service /usr/sbin/headroomd \
  /etc/systemd/system/multi-user.target.wants/headroomd.service /usr/lib/sysusers.d/headroom.conf; do
  if ct test -e "$p"; then fail "left behind: $p"; fi
done
if ct getent passwd headroom >/dev/null; then fail "user headroom left behind"; fi
if ct getent group headroom >/dev/null; then fail "group headroom left behind"; fi
if ct pgrep -x headroomd >/dev/null; then fail "headroomd still running"; fi
if ct systemctl list-unit-files headroomd.service | grep -q headroomd; then fail "unit still known to systemd"; fi
echo "purge: nothing left"
echo PASS
