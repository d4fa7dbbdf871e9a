#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The eBPF endpoint probes' costs, from an existing build directory (it builds
# nothing), as four measurements with the machine's context and a results
# table at the end (docs/benchmarks.md, "Endpoint probes (eBPF)"):
#
#  1. throughput: nginx (1 worker, keep-alive, `return 200`) at saturation,
#     driven by wrk: untraced (headroomd --no-ebpf) vs traced (the probe on
#     nginx's port), alternating in blocks of A B F C D D C F B A; C = traced
#     with kernel.bpf_stats_enabled=1 for the eBPF CPU per request (bpftool
#     run_time_ns), D = probe attached but nobody traced, F = untraced with
#     the eBPF floor attached (bench_ebpf_floor --hold: empty programs on the
#     tracepoints of the program set headroomd loads). Per kind: wrk's req/s
#     and requests per nginx-CPU-second (the worker's utime + stime from
#     /proc/PID/stat over the run), medians with the spread across blocks, and
#     the product's (B) and the floor's (F) loss against A. One more traced
#     run counts each side's syscalls with perf, if installed.
#  2. syscalls: bench_syscall_overhead (a process that is not a server) with
#     headroomd's probe attached (its endpoint on another port) vs without
#     headroomd, alternating ABBA in one process; then the programs' own time.
#  3. agent: headroomd's CPU and peak RSS with 0 (baseline), 1, 16 and 256
#     endpoints (and 256 with --no-ebpf) while 10 000 idle keep-alive
#     connections are open to nginx and hr-test-load sends 1000 requests/s.
#  4. floor: bench_ebpf_floor, one process doing loopback request/response
#     exchanges with nothing, the empty floor programs and the probe attached
#     in rotating slices: per program set, the product's and the floor's CPU
#     per exchange over none, and their ratio (medians of per-cycle
#     differences, interquartile ranges).
#
#   bench/bench_endpoints.sh [--quick] [--only throughput,syscalls,agent,floor] BUILD_DIR
#
# --quick: a smoke run (1 block, 2 s wrk runs, 2000 connections, 5 s agent
# windows, 10 floor cycles) that checks the benchmark still runs; its figures
# are not measurements of the goals. --only: the listed parts. Needs root,
# nginx, wrk, bpftool, jq, taskset, ss; perf optional. Everything temporary
# lives in a fresh directory under /dev/shm, removed at the end (also on
# SIGTERM); kernel.bpf_stats_enabled is restored. About 9 minutes, --quick
# about 2.
set -euo pipefail

quick=0
build=""
only="throughput,syscalls,agent,floor"
while (($#)); do
  case "$1" in
    --quick) quick=1 ;;
    --only) only="${2:?--only needs a list}"; shift ;;
    --only=*) only="${1#--only=}" ;;
    -h|--help) sed -n '2,38p' "$0"; exit 0 ;;
    -*) echo "bench_endpoints.sh: unknown option $1" >&2; exit 2 ;;
    *) build="$1" ;;
  esac
  shift
done
if [[ -z "$build" ]]; then
  echo "usage: bench/bench_endpoints.sh [--quick] [--only throughput,syscalls,agent,floor] BUILD_DIR" >&2
  exit 2
fi
want() { [[ ",$only," == *",$1,"* ]]; }
[[ -d "$build" ]] || { echo "bench_endpoints.sh: $build: no such directory" >&2; exit 2; }
build=$(cd "$build" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)

# ---------------------------------------------------------------- parameters
if ((quick)); then
  blocks=1            # blocks of A B F C D D C F B A
  wrk_seconds=2
  sys_blocks=1
  sys_args=(--getppid 200000 --pipe 200000 --tcp 20000 --rounds 2)
  conns=2000
  agent_window=5      # seconds of steady state measured per endpoint count
  floor_args=(--cycles 10 --slice 1000)
else
  blocks=3
  wrk_seconds=5
  sys_blocks=3
  sys_args=(--getppid 1000000 --pipe 1000000 --tcp 100000 --rounds 3)
  conns=10000
  agent_window=25
  floor_args=(--cycles 150 --slice 3000)
fi
agent_warmup=3        # seconds after the connections and the load are up
# endpoint counts of the agent measurement; "-off": the same with --no-ebpf
# (endpoint reports published, no probe), to tell the probe's share from the
# reports'
endpoint_counts=(0 1 16 256 256-off)
load_rate=1000        # requests/s of light traffic in the agent measurement
wrk_cmd=(wrk -t1 -c32 -d"${wrk_seconds}s")
cpu_server=1          # nginx's worker and bench_syscall_overhead
cpu_client=0          # wrk, hr-test-load, bench_open_conns, headroomd and bench_ebpf_floor --hold

# ------------------------------------------------------------------ preflight
fail() { echo "bench_endpoints.sh: $*" >&2; exit 2; }
((EUID == 0)) || fail "needs root (eBPF, sysctl, bpftool)"
for tool in nginx wrk bpftool jq taskset ss; do
  command -v "$tool" >/dev/null || fail "$tool not found (apt-get install -y nginx-light wrk bpftool jq iproute2)"
done
headroomd="$build/agent/headroomd"
headroomctl="$build/agent/headroomctl"
load_bin="$build/tests/tools/hr-test-load"
sys_bin="$build/bench/bench_syscall_overhead"
conns_bin="$build/bench/bench_open_conns"
floor_bin="$build/bench/bench_ebpf_floor"
needed=("$headroomd" "$headroomctl" "$load_bin" "$sys_bin" "$conns_bin")
if want throughput || want floor; then needed+=("$floor_bin"); fi
for b in "${needed[@]}"; do
  [[ -x "$b" ]] || fail "$b not built; run: cmake --build $build --target headroomd headroomctl hr-test-server hr-test-load bench_syscall_overhead bench_open_conns bench_ebpf_floor"
done
[[ -r /sys/kernel/btf/vmlinux ]] || fail "no /sys/kernel/btf/vmlinux: the probe needs a kernel with BTF"
ulimit -Hn 65536 2>/dev/null || true
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
(($(ulimit -n) >= conns + 256)) || fail "ulimit -n $(ulimit -n) is below $((conns + 256))"

stats_orig=$(sysctl -n kernel.bpf_stats_enabled)
work=$(mktemp -d /dev/shm/hr-bench-endpoints.XXXXXX)
chmod 755 "$work"  # nginx's worker (nobody) walks into it
cd "$work"
pids=()            # every process started here and still running, stopped by id at the end
nginx_master=""
untrack() {        # after waiting for $1: it is no longer ours to stop
  local p keep=()
  for p in "${pids[@]}"; do [[ "$p" == "$1" ]] || keep+=("$p"); done
  pids=("${keep[@]}")
}
cleanup() {
  local p
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  sysctl -qw kernel.bpf_stats_enabled="$stats_orig" || true
  cd / && rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ------------------------------------------------------------------- helpers
# median of the numbers on stdin (mean of the middle two for an even count)
median() { sort -g | awk '{a[NR]=$1} END {if (NR == 0) {print "nan"; exit} if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
# "min..max" of the numbers on stdin, rounded
spread() { sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {if (NR == 0) print "-"; else printf "%.0f..%.0f\n", lo, hi}'; }
calc() { awk "BEGIN {printf \"$1\", ($2)}"; }  # parenthesized: a ">" compares, never redirects
port_free() { [[ -z "$(ss -Htln "sport = :$1")" ]]; }
cpu_ns() { awk '{print $1}' "/proc/$1/schedstat"; }               # exact runtime
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }         # utime + stime
status_kb() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; }
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
hz=$(getconf CLK_TCK)

# nginx's port: the first free one from 18080; the 255 idle endpoint ports
# follow it (below the ephemeral range, so no client socket gets one).
port=18080
while ! port_free "$port" || ! port_free $((port + 1)); do port=$((port + 300)); done
other_port=$((port + 1))   # headroomd's endpoint in the syscall benchmark: nobody listens

# nginx: one worker pinned to cpu_server, keep-alive, no access log, a 3-byte body.
start_nginx() {
  mkdir -p "$work/nginx/tmp" "$work/nginx/logs"
  cat >"$work/nginx/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $work/nginx/nginx.pid;
error_log $work/nginx/logs/error.log warn;
worker_rlimit_nofile $((conns * 2 + 1024));
events { worker_connections $((conns * 2)); }
http {
  access_log off;
  client_body_temp_path $work/nginx/tmp/body;
  proxy_temp_path $work/nginx/tmp/proxy;
  fastcgi_temp_path $work/nginx/tmp/fastcgi;
  uwsgi_temp_path $work/nginx/tmp/uwsgi;
  scgi_temp_path $work/nginx/tmp/scgi;
  keepalive_timeout 3600s;
  keepalive_requests 1000000000;
  client_header_timeout 3600s;
  server {
    listen 127.0.0.1:$port backlog=4096;
    location / { default_type text/plain; return 200 "ok\n"; }
  }
}
EOF
  taskset -c "$cpu_server" nginx -p "$work/nginx" -c "$work/nginx/nginx.conf" -e "$work/nginx/logs/error.log" \
    >"$work/nginx/out" 2>&1 &
  nginx_master=$!
  pids+=("$nginx_master")
  local i
  for i in $(seq 50); do
    nginx_worker=$(pgrep -P "$nginx_master" | head -n1 || true)
    [[ -n "$nginx_worker" ]] && ! port_free "$port" && return 0
    sleep 0.1
  done
  cat "$work/nginx/out" "$work/nginx/logs/error.log" >&2 || true
  fail "nginx did not start"
}

# headroomd: start_agent MODE NAME [headroomd args...]; MODE ebpf (waits for
# the probe), noebpf (adds --no-ebpf) or plain (no endpoints).
# Waits until it has started (and, with eBPF, attached); sets agent_pid,
# agent_log, agent_dir, agent_prog_ids (the programs attached through its links).
agent_n=0
start_agent() {
  local mode=$1 name=$2
  shift 2
  agent_n=$((agent_n + 1))
  agent_dir="$work/agent.$agent_n.$name"
  agent_log="$agent_dir/headroomd.log"
  mkdir -p "$agent_dir"
  [[ -f "$agent_dir/headroom.toml" ]] || echo "# bench_endpoints.sh: all defaults (interval 100ms)" >"$agent_dir/headroom.toml"
  local args=(--config "$agent_dir/headroom.toml" --orca-dir "$agent_dir/orca" "$@")
  [[ "$mode" == noebpf ]] && args+=(--no-ebpf)
  env -u NOTIFY_SOCKET taskset -c "$cpu_client" "$headroomd" "${args[@]}" >"$agent_log" 2>&1 &
  agent_pid=$!
  pids+=("$agent_pid")
  # Started: its first log line about the start. Attached: it holds bpf links
  # (from /proc/PID/fdinfo, not from log wording that may change).
  local i
  for i in $(seq 100); do
    if ! kill -0 "$agent_pid" 2>/dev/null; then cat "$agent_log" >&2; fail "headroomd exited at start"; fi
    agent_prog_ids=$(agent_links "$agent_pid")
    if grep -q "headroomd started" "$agent_log"; then
      if [[ "$mode" != ebpf || -n "$agent_prog_ids" ]]; then break; fi
      if grep -q "endpoint latency signals unavailable" "$agent_log"; then cat "$agent_log" >&2; fail "the eBPF probe did not load"; fi
    fi
    sleep 0.1
  done
  grep -q "headroomd started" "$agent_log" || { cat "$agent_log" >&2; fail "headroomd did not start in 10 s"; }
  if [[ "$mode" == ebpf && -z "$agent_prog_ids" ]]; then cat "$agent_log" >&2; fail "headroomd $agent_pid attached no eBPF programs in 10 s"; fi
}
# The ids of the programs a process attached: its bpf_link descriptors' prog_id.
agent_links() {
  local f
  for f in /proc/"$1"/fdinfo/*; do
    awk '/^link_id:/ {l = 1} /^prog_id:/ {p = $2} END {if (l && p) print p}' "$f" 2>/dev/null || true
  done | sort -n | tr '\n' ' '
}
stop_agent() {
  kill -TERM "$agent_pid" 2>/dev/null || true
  wait "$agent_pid" 2>/dev/null || true
  untrack "$agent_pid"
}
maps_mib() { sed -n 's/.*maps \([0-9.]*\) MiB.*/\1/p' "$agent_log" | head -n1; }

# bench_ebpf_floor --hold FLOOR (floor-sockets or floor-syscalls): that floor's
# empty programs attached until stop_floor. Waits until they are; sets floor_pid.
start_floor() {
  taskset -c "$cpu_client" "$floor_bin" --hold "$1" >"$work/floor-hold.out" 2>&1 &
  floor_pid=$!
  pids+=("$floor_pid")
  local i
  for i in $(seq 100); do
    grep -q '^holding' "$work/floor-hold.out" && return 0
    kill -0 "$floor_pid" 2>/dev/null || break
    sleep 0.1
  done
  cat "$work/floor-hold.out" >&2
  fail "bench_ebpf_floor --hold $1 did not attach its programs"
}
stop_floor() {
  kill -TERM "$floor_pid" 2>/dev/null || true
  wait "$floor_pid" 2>/dev/null || true
  untrack "$floor_pid"
}

# "id name run_time_ns run_cnt" of the given program ids
prog_stats() {
  local ids
  ids=$(echo "$*" | tr ' ' '\n' | grep . | paste -sd, -)
  bpftool prog show -j | jq -r --argjson ids "[$ids]" \
    '.[] | select(.id as $i | $ids | index($i)) | "\(.id) \(.name) \(.run_time_ns // 0) \(.run_cnt // 0)"'
}
# "name d_run_time_ns d_run_cnt" between two prog_stats snapshots
prog_delta() {
  awk 'NR == FNR {t[$1] = $3; c[$1] = $4; next} {print $2, $3 - t[$1], $4 - c[$1]}' "$1" "$2"
}
# How many bpf links attach hr_* programs other than ours (other engineers' tests).
foreign_hr_links() {
  local ours
  ours=$(echo "${1:-}" | tr ' ' '\n' | grep . | paste -sd, -)
  jq -n --argjson ours "[${ours}]" --slurpfile p <(bpftool prog show -j) --slurpfile l <(bpftool link show -j) \
    '[$p[0][] | select(.name | startswith("hr_")) | .id] as $hr
     | [$l[0][] | .prog_id | select(. as $x | ($hr | index($x)) and (($ours | index($x)) | not))] | length'
}

# Other engineers' tests attach the same programs now and then: their cost
# would land in the figures. Waits up to 60 s for them to go; returns how
# many are still attached.
quiet_bpf() {
  local i fh
  for i in $(seq 60); do
    fh=$(foreign_hr_links "${1:-}")
    ((fh == 0)) && break
    sleep 1
  done
  echo "$fh"
}

echo "# headroom endpoint-probe benchmarks$( ((quick)) && echo ' (--quick: smoke run, not a measurement)')"
echo "date:    $(date -u '+%Y-%m-%dT%H:%M:%SZ')"
echo "commit:  $(git -C "$src" describe --always --dirty 2>/dev/null || echo '?')"
echo "kernel:  $(uname -r)"
echo "nproc:   $(nproc)"
echo "cpu:     $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)"
echo "load:    $(cat /proc/loadavg)"
echo "nginx:   $(nginx -v 2>&1 | sed 's/^nginx version: //'), wrk: $(wrk -v 2>&1 | head -n1 | cut -d' ' -f1-2)"
echo "pinning: nginx worker and bench_syscall_overhead on CPU $cpu_server; wrk, hr-test-load, bench_open_conns, headroomd on CPU $cpu_client"
echo "work:    $work (port $port)"
fh=$(foreign_hr_links "")
((fh == 0)) || echo "WARNING: $fh bpf link(s) of hr_* programs from other processes are attached: their cost is in every figure"
echo

start_nginx
echo "nginx: master $nginx_master, worker $nginx_worker; $work/nginx/nginx.conf: worker_processes 1, keepalive, access_log off," 'return 200 "ok\n",' "listen 127.0.0.1:$port"
echo

results=()       # lines of the final table
declare -A rps_med=() eff_med=()
results_prog=()  # ... and of the per-program table

# ========================================================= 1. throughput
# Five kinds of run, palindromic in each block (A B F C D D C F B A) so a
# drift hits every kind alike:
#   A  untraced: headroomd with --no-ebpf (same endpoint, same configuration)
#   B  traced: the same headroomd with the probe attached (the goal's figure)
#   F  untraced, with the eBPF floor attached: A plus bench_ebpf_floor --hold,
#      empty programs on the tracepoints of the set B loads (what any program
#      there costs; B's loss against it is what the probe's work costs)
#   C  traced, kernel.bpf_stats_enabled=1 during wrk: the programs' run time
#   D  probe attached with its endpoint on another port (nobody traced, every
#      process pays the untraced tax), bpf_stats on: that tax per request
# wrk's req/s swings +-10-25 % between runs of one kind on a shared VM;
# requests per nginx-CPU-second (the worker's utime + stime) hold better.
if want throughput; then
  # The floor under nginx is the one of the program set headroomd loads here.
  start_agent ebpf tput --endpoint "name=web,port=$port,target=10ms,max=500ms"
  product_progs=$(prog_stats "$agent_prog_ids" | awk '{print $2}' | sort | paste -sd' ' -)
  stop_agent
  if [[ " $product_progs" == *" hr_sock_"* ]]; then floor_hold=floor-sockets; else floor_hold=floor-syscalls; fi
  echo "## 1. nginx at saturation, traced vs untraced ($blocks block(s) of A B F C D D C F B A, wrk ${wrk_seconds}s each)"
  echo "A untraced: headroomd --no-ebpf, endpoint on nginx's port; B traced: the same with the probe attached ($product_progs);"
  echo "F untraced (as A) with bench_ebpf_floor --hold $floor_hold (empty programs on the same tracepoints);"
  echo "C traced with kernel.bpf_stats_enabled=1 (eBPF run time); D probe attached, endpoint on port $other_port (nginx not traced), bpf_stats on"
  taskset -c "$cpu_client" wrk -t1 -c32 -d1s "http://127.0.0.1:$port/" >/dev/null  # warm-up
  declare -A prog_time=() prog_cnt=() rps=() eff=() effs=() nsreq=() reqs=() bpf_ns=()
  disturbed=0
  order=()
  for ((b = 0; b < blocks; b++)); do order+=(A B F C D D C F B A); done
  printf '%-4s %-2s %-22s %9s %10s %14s %14s %11s %9s %11s %s\n' run "" mode "req/s" requests "req/ngx-cpu-s" "(schedstat)" \
    "nginx cpu%" "wrk cpu%" "bpf ns/req" "load"
  run=0
  for mode in "${order[@]}"; do
    run=$((run + 1))
    case $mode in
      A) label="untraced (--no-ebpf)"; start_agent noebpf tput --endpoint "name=web,port=$port,target=10ms,max=500ms" ;;
      B) label="traced"; start_agent ebpf tput --endpoint "name=web,port=$port,target=10ms,max=500ms" ;;
      F) label="untraced + floor"; start_floor "$floor_hold"
         start_agent noebpf tput --endpoint "name=web,port=$port,target=10ms,max=500ms" ;;
      C) label="traced + bpf_stats"; start_agent ebpf tput --endpoint "name=web,port=$port,target=10ms,max=500ms" ;;
      D) label="other port + bpf_stats"; start_agent ebpf tput --endpoint "name=web,port=$other_port,target=10ms,max=500ms" ;;
    esac
    sleep 0.5
    fh=$(quiet_bpf "$agent_prog_ids")
    ((fh == 0)) || disturbed=$((disturbed + 1))
    if [[ "$mode" == [CD] ]]; then
      sysctl -qw kernel.bpf_stats_enabled=1
      prog_stats "$agent_prog_ids" >"$work/bpf0"
    fi
    rm -f "$work/probe.json"
    # What the probe saw: the endpoint report in the middle of the run (its 1 s window).
    if [[ "$mode" == [BC] ]]; then
      (sleep "$(calc %.1f "$wrk_seconds / 2")"
       taskset -c "$cpu_client" "$headroomctl" cat "$agent_dir/orca/endpoint.web.orca" --json >"$work/probe.json" 2>&1) &
      probe_reader=$!
    fi
    c0=$(cpu_ns "$nginx_worker"); s0=$(cpu_ticks "$nginx_worker"); t0=$(date +%s%N)
    # wrk's own CPU (user + system from its rusage) shows which side saturated
    { TIMEFORMAT='%3U %3S'; time taskset -c "$cpu_client" "${wrk_cmd[@]}" "http://127.0.0.1:$port/" >"$work/wrk.out" 2>&1; } 2>"$work/wrk.time"
    c1=$(cpu_ns "$nginx_worker"); s1=$(cpu_ticks "$nginx_worker"); t1=$(date +%s%N)
    [[ "$mode" == [CD] ]] && prog_stats "$agent_prog_ids" >"$work/bpf1"
    sysctl -qw kernel.bpf_stats_enabled="$stats_orig"
    seen=""
    if [[ "$mode" == [BC] ]]; then
      wait "$probe_reader" || true
      seen=$(jq -r '.report.rps_fractional // empty' "$work/probe.json" 2>/dev/null || true)
    fi
    stop_agent
    [[ "$mode" == F ]] && stop_floor
    requests=$(awk '/requests in/ {print $1}' "$work/wrk.out")
    r=$(awk '/^Requests\/sec:/ {print $2}' "$work/wrk.out")
    if [[ -z "$requests" || -z "$r" ]]; then cat "$work/wrk.out" >&2; fail "wrk failed"; fi
    if grep -q "Socket errors\|Non-2xx" "$work/wrk.out"; then echo "  wrk: $(grep 'Socket errors\|Non-2xx' "$work/wrk.out")"; fi
    e=$(calc %.0f "$requests / (($c1 - $c0) / 1e9)")
    es=$(calc %.0f "($s1 > $s0) ? $requests / (($s1 - $s0) / $hz) : 0")  # utime + stime, in ticks
    ncpu=$(calc %.1f "100 * ($c1 - $c0) / ($t1 - $t0)")
    wcpu=$(awk -v t="$(calc %.3f "($t1 - $t0) / 1e9")" '{printf "%.1f", 100 * ($1 + $2) / t}' "$work/wrk.time")
    rps[$mode]+="$r "; eff[$mode]+="$e "; effs[$mode]+="$es "
    nr="-"
    if [[ "$mode" == [CD] ]]; then
      prog_delta "$work/bpf0" "$work/bpf1" >"$work/bpfd"
      run_ns=0
      while read -r name dt dc; do
        prog_time[$mode.$name]=$((${prog_time[$mode.$name]:-0} + dt))
        prog_cnt[$mode.$name]=$((${prog_cnt[$mode.$name]:-0} + dc))
        run_ns=$((run_ns + dt))
      done <"$work/bpfd"
      bpf_ns[$mode]=$((${bpf_ns[$mode]:-0} + run_ns))
      reqs[$mode]=$((${reqs[$mode]:-0} + requests))
      nr=$(calc %.0f "$run_ns / $requests")
      nsreq[$mode]+="$nr "
    fi
    printf '%-4s %-2s %-22s %9.0f %10s %14s %14s %11s %9s %11s %s%s%s\n' "$run" "$mode" "$label" "$r" "$requests" "$es" "$e" "$ncpu" "$wcpu" "$nr" \
      "$(loadavg)" "$([[ -n "$seen" ]] && echo "  probe saw $(calc %.0f "$seen") req/s mid-run")" \
      "$( ((fh)) && echo "  ($fh foreign hr_ links!)")"
  done
  med() { echo "$1" | tr ' ' '\n' | grep . | median; }
  spr() { echo "$1" | tr ' ' '\n' | grep . | spread; }
  declare -A effs_med=()
  for m in A B F C D; do
    rps_med[$m]=$(med "${rps[$m]}"); eff_med[$m]=$(med "${eff[$m]}"); effs_med[$m]=$(med "${effs[$m]}")
  done
  loss=$(calc %.2f "100 * (1 - ${rps_med[B]} / ${rps_med[A]})")
  loss_c=$(calc %.2f "100 * (1 - ${rps_med[C]} / ${rps_med[A]})")
  loss_f=$(calc %.2f "100 * (1 - ${rps_med[F]} / ${rps_med[A]})")
  eff_loss=$(calc %.2f "100 * (1 - ${eff_med[B]} / ${eff_med[A]})")
  effs_loss_b=$(calc %.2f "100 * (1 - ${effs_med[B]} / ${effs_med[A]})")
  effs_loss_f=$(calc %.2f "100 * (1 - ${effs_med[F]} / ${effs_med[A]})")
  effs_ratio=$(calc %.2f "($effs_loss_f > 0) ? $effs_loss_b / $effs_loss_f : 0")
  echo
  echo "per kind, medians of $(echo "${rps[A]}" | wc -w) run(s) [min..max across blocks]; loss against A:"
  printf '  %-2s %-28s %9s %15s %8s   %13s %15s %8s\n' "" kind "req/s" "" loss "req/ngx-cpu-s" "" loss
  for m in A B F C D; do
    case $m in
      A) label="untraced" ;; B) label="traced" ;; F) label="untraced + $floor_hold" ;;
      C) label="traced + bpf_stats" ;; D) label="other port + bpf_stats" ;;
    esac
    printf '  %-2s %-28s %9.0f %15s %7.2f%%   %13.0f %15s %7.2f%%\n' "$m" "$label" \
      "${rps_med[$m]}" "[$(spr "${rps[$m]}")]" "$(calc %.2f "100 * (1 - ${rps_med[$m]} / ${rps_med[A]})")" \
      "${effs_med[$m]}" "[$(spr "${effs[$m]}")]" "$(calc %.2f "100 * (1 - ${effs_med[$m]} / ${effs_med[A]})")"
  done
  nsreq_med=$(calc %.0f "$(med "${nsreq[C]}")")
  nsreq_d=$(calc %.0f "$(med "${nsreq[D]}")")
  echo
  for m in C D; do
    echo "per program, over all $m runs (${reqs[$m]} requests):"
    printf '  %-22s %14s %14s %14s %14s\n' program invocations "per request" "ns/invocation" "ns/request"
    for key in $(printf '%s\n' "${!prog_time[@]}" | grep "^$m\." | sort); do
      name=${key#"$m".}
      t=${prog_time[$key]} c=${prog_cnt[$key]} n=${reqs[$m]}
      printf '  %-22s %14d %14.2f %14.1f %14.1f\n' "$name" "$c" "$(calc %.2f "$c / $n")" \
        "$(calc %.1f "$c ? $t / $c : 0")" "$(calc %.1f "$t / $n")"
      results_prog+=("| $m | \`${name}\` | $(calc %.2f "$c / $n") | $(calc %.0f "$c ? $t / $c : 0") | $(calc %.0f "$t / $n") |")
    done
  done
  ((disturbed == 0)) || echo "WARNING: $disturbed run(s) had foreign hr_* programs attached"
  # Whose system calls the programs run on: one more traced run (not in the
  # figures above) with perf counting each side's syscalls; nginx's recvfrom
  # count is the requests it served in the window.
  if command -v perf >/dev/null; then
    start_agent ebpf tput --endpoint "name=web,port=$port,target=10ms,max=500ms"
    sleep 0.5
    taskset -c "$cpu_client" "${wrk_cmd[@]}" "http://127.0.0.1:$port/" >"$work/wrk.out" 2>&1 &
    wrk_pid=$!
    pids+=("$wrk_pid")
    sleep 0.5
    events=raw_syscalls:sys_enter,syscalls:sys_enter_recvfrom,syscalls:sys_enter_writev
    win=$(calc %.1f "($wrk_seconds > 2) ? $wrk_seconds - 1.5 : 1")
    perf stat -x, -e "$events" -p "$nginx_worker" -- sleep "$win" 2>"$work/perf.nginx" >/dev/null &
    perf_pid=$!
    perf stat -x, -e raw_syscalls:sys_enter -t "$(ls /proc/"$wrk_pid"/task | paste -sd,)" -- sleep "$win" 2>"$work/perf.wrk" >/dev/null || true
    wait "$perf_pid" || true
    wait "$wrk_pid" || true
    untrack "$wrk_pid"
    stop_agent
    ev() { awk -F, -v e="$2" '$3 == e {print $1}' "$1"; }
    served=$(ev "$work/perf.nginx" syscalls:sys_enter_recvfrom)
    if [[ "$served" =~ ^[0-9]+$ ]] && ((served > 0)); then
      sc_nginx=$(calc %.2f "$(ev "$work/perf.nginx" raw_syscalls:sys_enter) / $served")
      sc_io=$(calc %.2f "($served + $(ev "$work/perf.nginx" syscalls:sys_enter_writev)) / $served")
      sc_wrk=$(calc %.2f "$(ev "$work/perf.wrk" raw_syscalls:sys_enter) / $served")
      echo "syscalls per request, one traced run counted by perf: nginx worker $sc_nginx (recvfrom + writev: $sc_io), wrk $sc_wrk"
      perf_line="| syscalls per request (perf, one traced run): nginx worker (of which traced recvfrom + writev) / wrk | $sc_nginx ($sc_io) / $sc_wrk | |"
    else
      echo "perf could not count syscalls: $(head -n3 "$work/perf.nginx" | tr '\n' ' ')"
    fi
  fi
  perf_line=${perf_line:-}
  verdict_loss=$(awk -v l="$loss" 'BEGIN {print (l <= 3) ? (l <= 1 ? "met (aim met)" : "met (aim of 1 % missed)") : "MISSED"}')
  verdict_ns=$(awk -v n="$nsreq_med" 'BEGIN {print (n <= 500) ? (n <= 300 ? "met (aim met)" : "met (aim of 300 ns missed)") : "MISSED"}')
  nA=$(echo "${rps[A]}" | wc -w)
  results+=("| A: nginx req/s untraced (headroomd --no-ebpf), median of $nA | $(calc %.0f "${rps_med[A]}") | |")
  results+=("| B: nginx req/s traced, median of $(echo "${rps[B]}" | wc -w) | $(calc %.0f "${rps_med[B]}") | |")
  results+=("| throughput loss B vs A (goal <= 3 %, aim 1 %) | **${loss} %** | $verdict_loss |")
  results+=("| C: traced with bpf_stats on: req/s, loss vs A | $(calc %.0f "${rps_med[C]}"), ${loss_c} % | |")
  results+=("| F: untraced with the eBPF floor ($floor_hold) attached: req/s, loss vs A | $(calc %.0f "${rps_med[F]}"), ${loss_f} % | |")
  results+=("| requests per nginx-worker CPU-second (schedstat), A / B (loss) | $(calc %.0f "${eff_med[A]}") / $(calc %.0f "${eff_med[B]}") (${eff_loss} %) | |")
  results+=("| requests per nginx-worker CPU-second (utime + stime), A / B / F [min..max] | $(calc %.0f "${effs_med[A]}") [$(spr "${effs[A]}")] / $(calc %.0f "${effs_med[B]}") [$(spr "${effs[B]}")] / $(calc %.0f "${effs_med[F]}") [$(spr "${effs[F]}")] | |")
  results+=("| loss in requests per nginx-CPU-second vs A: product (B) / floor (F), and their ratio | **${effs_loss_b} %** / ${effs_loss_f} % ($( [[ "$effs_ratio" == 0.00 ]] && echo "floor within noise" || echo "${effs_ratio}x")) | |")
  results+=("| C: eBPF CPU per traced request (all hr_ programs' run_time_ns / wrk's requests), median of runs (goal <= 500 ns, aim 300 ns) | **${nsreq_med} ns** | $verdict_ns |")
  results+=("| D: the same with nginx not traced (the tax every syscall pays, wrk's and nginx's) | ${nsreq_d} ns | |")
  [[ -n "$perf_line" ]] && results+=("$perf_line")
  echo
fi

# ========================================================= 2. syscalls
if want syscalls; then
  echo "## 2. syscalls of a process that is not traced: without headroomd vs with the probe (endpoint on port $other_port), ABBA x $sys_blocks"
  echo "command: taskset -c $cpu_server bench_syscall_overhead ${sys_args[*]} --serve  (one process; one measurement per step, headroomd started/stopped in between)"
  declare -A sys_a=() sys_b=() sys_what=() sys_added=()
  # One process for every measurement (--serve: a line on stdin measures once).
  coproc SYSB { exec taskset -c "$cpu_server" "$sys_bin" "${sys_args[@]}" --serve; }
  sysb_pid=$SYSB_PID
  pids+=("$sysb_pid")
  order=()
  for ((b = 0; b < sys_blocks; b++)); do order+=(A B B A); done
  run=0
  for mode in "${order[@]}"; do
    run=$((run + 1))
    if [[ "$mode" == B ]]; then
      start_agent ebpf sys --endpoint "name=other,port=$other_port,target=10ms,max=500ms"
      fh=$(quiet_bpf "$agent_prog_ids")
      ((fh == 0)) || echo "WARNING: $fh foreign hr_* links attached"
      sleep 0.5
    elif (($(quiet_bpf "") > 0)); then
      echo "WARNING: foreign hr_* links attached"
    fi
    echo >&"${SYSB[1]}"
    : >"$work/sys.out"
    while IFS= read -r l <&"${SYSB[0]}" && [[ "$l" != end ]]; do echo "$l" >>"$work/sys.out"; done
    [[ "$mode" == B ]] && stop_agent
    line="$run $([[ "$mode" == A ]] && echo 'without ' || echo 'with    ')"
    while IFS=$'\t' read -r name med _; do
      if [[ "$mode" == A ]]; then sys_a[$name]+="$med "; else sys_b[$name]+="$med "; fi
      line+=" $name $med ns"
    done <"$work/sys.out"
    echo "$line   load $(loadavg)"
  done
  sysb_in=${SYSB[1]}
  exec {sysb_in}>&-   # EOF: the benchmark ends
  wait "$sysb_pid" || true
  untrack "$sysb_pid"
  echo
  printf '  %-44s %10s %10s %10s %8s\n' "ns per syscall (median of runs)" without "with" added "ratio"
  for name in getppid pipe tcp; do
    wa=$(echo "${sys_a[$name]}" | tr ' ' '\n' | grep . | median)
    wb=$(echo "${sys_b[$name]}" | tr ' ' '\n' | grep . | median)
    case $name in
      getppid) what="getppid() (null syscall)" ;;
      pipe) what="pipe write+read, 1 byte (per syscall)" ;;
      tcp) what="loopback TCP send+recv, 64 B (per syscall)" ;;
    esac
    printf '  %-44s %10.1f %10.1f %10.1f %7.3fx\n' "$what" "$wa" "$wb" "$(calc %.1f "$wb - $wa")" "$(calc %.3f "$wb / $wa")"
    sys_what[$name]=$what sys_added[$name]=$(calc %.1f "$wb - $wa")
    results+=("| untraced process: $what, without / with probe | $(calc %.1f "$wa") / $(calc %.1f "$wb") ns | +$(calc %.0f "$wb - $wa") ns ($(calc %.3f "$wb / $wa")x) |")
  done
  echo
  # Where the added time goes: the same loops once more with the probe and
  # kernel.bpf_stats_enabled=1 (not part of the figures above): the programs'
  # own run time per system call of the loop; the rest of the added time is
  # the tracepoints' dispatch (the syscall slow path, the BPF trampoline).
  echo "where the added time goes: the loops again with the probe and bpf_stats on (one run each, not in the medians above)"
  start_agent ebpf sys --endpoint "name=other,port=$other_port,target=10ms,max=500ms"
  fh=$(quiet_bpf "$agent_prog_ids")
  ((fh == 0)) || echo "WARNING: $fh foreign hr_* links attached during the split"
  sleep 0.5
  sysctl -qw kernel.bpf_stats_enabled=1
  printf '  %-44s %10s %12s %12s %s\n' "ns per syscall" added "with stats" "in programs" "per program (ns per syscall of the loop; invocations per syscall)"
  for name in getppid pipe tcp; do
    prog_stats "$agent_prog_ids" >"$work/bpf0"
    taskset -c "$cpu_server" "$sys_bin" "${sys_args[@]}" --only "$name" --tsv >"$work/sys.out"
    prog_stats "$agent_prog_ids" >"$work/bpf1"
    calls=$(cut -f4 "$work/sys.out")
    prog_delta "$work/bpf0" "$work/bpf1" >"$work/bpfd"
    in_progs=$(awk -v n="$calls" '{t += $2} END {printf "%.1f", t / n}' "$work/bpfd")
    per=$(awk -v n="$calls" '$3 > 0 {printf "%s %.1f (%.2fx); ", $1, $2 / n, $3 / n}' "$work/bpfd")
    printf '  %-44s %10s %12s %12s %s\n' "${sys_what[$name]}" "${sys_added[$name]}" "$(cut -f2 "$work/sys.out")" "$in_progs" "$per"
    results+=("| ... of the +${sys_added[$name]} ns on $name, in the eBPF programs (bpf_stats on: $(cut -f2 "$work/sys.out") ns per syscall) | $in_progs ns | |")
  done
  sysctl -qw kernel.bpf_stats_enabled="$stats_orig"
  stop_agent
  echo
fi

# ========================================================= 3. agent
if want agent; then
  echo "## 3. headroomd CPU and RSS with $conns idle keep-alive connections to nginx + $load_rate req/s (interval 100ms)"
  echo "CPU over ${agent_window}s of steady state (after the connections and the load are up + ${agent_warmup}s); endpoint 'web' on nginx's port, the others on idle ports $((port + 1))..$((port + 255))"
  for i in $(seq 1 255); do port_free $((port + i)) || echo "WARNING: port $((port + i)) has a listener"; done
  printf '%-12s %9s %13s %16s %10s %15s %10s %12s %11s %s\n' endpoints "maps MiB" "CPU % (stat)" "CPU % (schedst)" "VmHWM MiB" "(after start)" "VmRSS MiB" "conns open" "load req/s" "load avg"
  for label in "${endpoint_counts[@]}"; do
    n=${label%-off}
    mode=$( ((n > 0)) && echo ebpf || echo plain)
    [[ "$label" == *-off ]] && mode=noebpf
    mkdir -p "$work/agent.$((agent_n + 1)).ep$n"
    {
      echo "# bench_endpoints.sh: $n endpoint(s), the rest defaults (interval 100ms)"
      for ((i = 0; i < n; i++)); do
        if ((i == 0)); then echo -e "[[endpoint]]\nname = \"web\"\nport = $port"; else echo -e "[[endpoint]]\nname = \"idle$i\"\nport = $((port + i))"; fi
        echo -e "target = \"10ms\"\nmax = \"500ms\"\n"
      done
    } >"$work/agent.$((agent_n + 1)).ep$n/headroom.toml"
    start_agent "$mode" "ep$n"
    hwm_start=$(status_kb "$agent_pid" VmHWM)
    "$conns_bin" --port "$port" --connections "$conns" --request >"$work/conns.out" 2>&1 &
    conns_pid=$!
    pids+=("$conns_pid")
    for i in $(seq 600); do grep -q '^open' "$work/conns.out" && break; kill -0 "$conns_pid" 2>/dev/null || break; sleep 0.1; done
    grep -q '^open' "$work/conns.out" || { cat "$work/conns.out" >&2; fail "bench_open_conns did not open $conns connections"; }
    taskset -c "$cpu_client" "$load_bin" --port "$port" --connections 4 --rate "$load_rate" \
      --duration "$((agent_warmup + agent_window + 2))s" >"$work/load.json" 2>"$work/load.err" &
    load_pid=$!
    pids+=("$load_pid")
    sleep "$agent_warmup"
    s0=$(cpu_ticks "$agent_pid"); n0=$(cpu_ns "$agent_pid"); t0=$(date +%s%N)
    sleep "$agent_window"
    s1=$(cpu_ticks "$agent_pid"); n1=$(cpu_ns "$agent_pid"); t1=$(date +%s%N)
    hwm=$(status_kb "$agent_pid" VmHWM); rss=$(status_kb "$agent_pid" VmRSS)
    files=$(find "$agent_dir/orca" -name '*.orca' | wc -l)
    wait "$load_pid" || true
    untrack "$load_pid"
    kill -TERM "$conns_pid" 2>/dev/null || true; wait "$conns_pid" || true
    untrack "$conns_pid"
    stop_agent
    still=$(sed -n 's/^still open \([0-9]*\) of.*/\1/p' "$work/conns.out")
    load_rps=$(jq -r '.rps // empty' "$work/load.json" 2>/dev/null || true)
    load_rps=$([[ -n "$load_rps" ]] && calc %.0f "$load_rps" || echo "?")
    pct_stat=$(calc %.3f "100 * ($s1 - $s0) / $hz / (($t1 - $t0) / 1e9)")
    pct_ns=$(calc %.3f "100 * ($n1 - $n0) / ($t1 - $t0)")
    maps=$(maps_mib); maps=${maps:--}
    [[ "$mode" == noebpf ]] && label="$n no-ebpf"
    printf '%-12s %9s %13s %16s %10.2f %15.2f %10.2f %12s %11s %s\n' "$label" "$maps" "$pct_stat" "$pct_ns" \
      "$(calc %.2f "$hwm / 1024")" "$(calc %.2f "$hwm_start / 1024")" "$(calc %.2f "$rss / 1024")" "${still:-?}/$conns" "$load_rps" "$(loadavg)  ($files report files)"
    results+=("| headroomd, $label endpoint(s) ($conns conns, $load_rate req/s): CPU % of one core (stat / schedstat); VmHWM (at start) / VmRSS; maps | $pct_stat / $pct_ns %; $(calc %.1f "$hwm / 1024") ($(calc %.1f "$hwm_start / 1024")) / $(calc %.1f "$rss / 1024") MiB; $maps MiB | |")
  done
  echo
fi

# ========================================================= 4. floor
# bench_ebpf_floor once per program set (one set that does not load does not
# hide the other): per set, the CPU per loopback exchange of the floor and of
# the product over none, and the ratio, from its JSON.
if want floor; then
  echo "## 4. the eBPF floor: bench_ebpf_floor ${floor_args[*]} --set sockets, then --set syscalls (taskset -c $cpu_server)"
  echo "one thread, one loopback connection, both ends; none / floor (empty programs) / product (the probe) in rotating slices"
  for set in sockets syscalls; do
    (($(quiet_bpf "") > 0)) && echo "WARNING: foreign hr_* links attached"
    rm -f "$work/floor.json"
    if taskset -c "$cpu_server" "$floor_bin" "${floor_args[@]}" --set "$set" --json-file "$work/floor.json" 2>"$work/floor.err"; then
      cat "$work/floor.err" >&2
      row=$(jq -r --arg s "$set" '
          def q: "\(.median | round) [\(.p25 | round)..\(.p75 | round)]";
          def r: "\(.median * 100 | round / 100) [\(.p25 * 100 | round / 100)..\(.p75 * 100 | round / 100)]";
          .sets[$s].cpu_ns as $c
          | "\(.none_cpu_ns.median | round) / \($c.floor_minus_none | q) / \($c.product_minus_none | q) ns; **\($c.ratio | r)**"' \
        "$work/floor.json")
      results+=("| floor, $set set: CPU ns per loopback exchange, none / floor − none / product − none [IQR]; (product − none) / (floor − none) [IQR] | $row | |")
    else
      cat "$work/floor.err" >&2
      echo "bench_ebpf_floor --set $set failed (above)"
      results+=("| floor, $set set | failed: $(tail -n1 "$work/floor.err" | sed 's/|/\\|/g') | |")
    fi
    echo
  done
fi

# ========================================================= results
echo "## Results ($(date -u '+%Y-%m-%d %H:%M UTC'), load at end $(loadavg))"
echo
echo "| figure | value | goal |"
echo "|---|---|---|"
printf '%s\n' "${results[@]}"
if ((${#results_prog[@]} > 0)); then
  echo
  echo "| runs | program | invocations per request | ns per invocation | ns per request |"
  echo "|---|---|---|---|---|"
  printf '%s\n' "${results_prog[@]}"
fi
echo
echo "commands:"
echo "  nginx -p DIR -c DIR/nginx.conf   (taskset -c $cpu_server; worker_processes 1, worker_connections $((conns * 2)), keepalive, access_log off," 'return 200 "ok\n")'
echo "  taskset -c $cpu_client ${wrk_cmd[*]} http://127.0.0.1:$port/"
echo "  taskset -c $cpu_client headroomd --config DIR/headroom.toml --orca-dir DIR/orca --endpoint name=web,port=$port,target=10ms,max=500ms [--no-ebpf]"
echo "  sysctl -w kernel.bpf_stats_enabled=1; bpftool prog show -j  (run_time_ns, run_cnt of the programs headroomd's links attach)"
echo "  taskset -c $cpu_server bench_syscall_overhead ${sys_args[*]} --serve   (with headroomd --endpoint name=other,port=$other_port,... vs without)"
echo "  bench_open_conns --port $port --connections $conns --request; taskset -c $cpu_client hr-test-load --port $port --connections 4 --rate $load_rate"
echo "  headroomd --config DIR/headroom.toml (0/1/16/256 [[endpoint]]s) --orca-dir DIR/orca"
echo "  taskset -c $cpu_client bench_ebpf_floor --hold floor-sockets|floor-syscalls   (run F: as A, with the floor attached)"
echo "  taskset -c $cpu_server bench_ebpf_floor ${floor_args[*]} --set sockets|syscalls"
