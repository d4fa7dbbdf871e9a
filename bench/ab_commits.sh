#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The endpoint probe of two commits against each other: runs the
# bench_ebpf_floor of two build directories alternately (A B, B A, A B, ...),
# short runs with the same options, and compares per program set the
# probe's cost per loopback exchange over nothing attached (product - none),
# over the floor (product - floor) and its ratio to the floor. Each figure is
# a run's median over its cycles; runs are paired by alternation and the
# result is the median of the paired differences B - A, with their
# interquartile range and range, and that median as a % of A's median.
# The programs' own ns per exchange (bpf_stats, one slice per run) is the
# least noisy of them: it leaves out the dispatch, which both pay alike.
#
#   bench/ab_commits.sh [--alternations N (10)] [--set S ...] [--pin CPU] [--keep DIR]
#                       BUILD_A BUILD_B [-- bench_ebpf_floor options]
#
# --set may be given more than once (default: sockets, then syscalls); each
# set is its own run of both binaries. The options after -- go to every run
# (default: --cycles 40 --slice 1000). --pin runs them with taskset -c CPU.
# --keep DIR keeps every run's JSON (a<i>-<set>.json, b<i>-<set>.json).
# Needs root (bench_ebpf_floor does) and python3.
#
# Build A at another commit in a worktree of its own, e.g.:
#   git worktree add --detach ../old b8d6d2e
#   cmake -S ../old -B ../old/build -DCMAKE_BUILD_TYPE=RelWithDebInfo
#   cmake --build ../old/build --target bench_ebpf_floor
#   cmake --build build --target bench_ebpf_floor
#   sudo bench/ab_commits.sh ../old/build build
set -euo pipefail

alternations=10
sets=()
pin=""
keep=""
builds=()
extra=()
while (($#)); do
  case "$1" in
    --alternations) alternations="$2"; shift 2 ;;
    --set) sets+=("$2"); shift 2 ;;
    --pin) pin="$2"; shift 2 ;;
    --keep) keep="$2"; shift 2 ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    --) shift; extra=("$@"); break ;;
    -*) echo "ab_commits.sh: unknown option $1" >&2; exit 2 ;;
    *) builds+=("$1"); shift ;;
  esac
done
if ((${#builds[@]} != 2)); then
  echo "usage: bench/ab_commits.sh [options] BUILD_A BUILD_B [-- bench_ebpf_floor options]" >&2
  exit 2
fi
((${#sets[@]})) || sets=(sockets syscalls)
((${#extra[@]})) || extra=(--cycles 40 --slice 1000)
bin_a="${builds[0]}/bench/bench_ebpf_floor"
bin_b="${builds[1]}/bench/bench_ebpf_floor"
for b in "$bin_a" "$bin_b"; do
  [[ -x "$b" ]] || { echo "ab_commits.sh: $b is not built" >&2; exit 2; }
done

out="$keep"
if [[ -z "$out" ]]; then
  out="$(mktemp -d /dev/shm/headroom-ab.XXXXXX)"
  trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out"
prefix=()
[[ -n "$pin" ]] && prefix=(taskset -c "$pin")

echo "# ab_commits: A = $bin_a ($(git -C "${builds[0]}/.." rev-parse --short HEAD 2>/dev/null || echo '?'))"
echo "#             B = $bin_b ($(git -C "${builds[1]}/.." rev-parse --short HEAD 2>/dev/null || echo '?'))"
echo "# $(date -u '+%F %T UTC'); $(uname -r); $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $alternations alternations per set; options: ${extra[*]}${pin:+; pinned to CPU $pin}"
for set in "${sets[@]}"; do
  for ((i = 0; i < alternations; i++)); do
    # Alternate which goes first, so a drift within a pair hits both alike.
    if ((i % 2 == 0)); then order=(a b); else order=(b a); fi
    for who in "${order[@]}"; do
      if [[ "$who" == a ]]; then bin="$bin_a"; else bin="$bin_b"; fi
      "${prefix[@]}" "$bin" --set "$set" "${extra[@]}" --json > "$out/$who$i-$set.json"
    done
  done
done

python3 - "$out" "$alternations" "${sets[@]}" <<'EOF'
import json, statistics, sys

out, n, sets = sys.argv[1], int(sys.argv[2]), sys.argv[3:]

def quart(v):
    v = sorted(v)
    if len(v) < 2:
        return v[0], v[0], v[0]
    q = statistics.quantiles(v, n=4, method="inclusive")
    return q[0], statistics.median(v), q[2]

def figures(path, set_name):
    j = json.load(open(path))
    s = j["sets"][set_name]
    c = s["cpu_ns"]
    prog = sum(p["ns_per_exchange"] for name, p in s["programs"].items() if name.startswith("hr_"))
    floor_prog = sum(p["ns_per_exchange"] for name, p in s["programs"].items() if name.startswith("floor_"))
    return {
        "none": j["none_cpu_ns"]["median"],
        "floor - none": c["floor_minus_none"]["median"],
        "product - none": c["product_minus_none"]["median"],
        "product - floor": c["product_minus_none"]["median"] - c["floor_minus_none"]["median"],
        "ratio to floor": c["ratio"]["median"],
        "ratio of the medians": c["ratio_of_medians"],
        "bpf_stats: product programs": prog,
        "bpf_stats: floor programs": floor_prog,
    }

for set_name in sets:
    a = [figures(f"{out}/a{i}-{set_name}.json", set_name) for i in range(n)]
    b = [figures(f"{out}/b{i}-{set_name}.json", set_name) for i in range(n)]
    print(f"\nset {set_name}: CPU ns per exchange, each run's median over its cycles; "
          f"{n} pairs, B - A: median [p25..p75] (min..max)")
    print(f"{'figure':30} {'A median':>10} {'B median':>10} {'B - A':>9} {'[p25..p75]':>18} {'(min..max)':>20} {'change':>8}")
    for key in a[0]:
        va = [r[key] for r in a]
        vb = [r[key] for r in b]
        d = [y - x for x, y in zip(va, vb)]
        lo, med, hi = quart(d)
        ma, mb = statistics.median(va), statistics.median(vb)
        fmt = "{:.3f}" if key.startswith("ratio") else "{:.0f}"
        pct = f"{100 * med / ma:+.1f} %" if ma else ""
        print(f"{key:30} {fmt.format(ma):>10} {fmt.format(mb):>10} {fmt.format(med):>9} "
              f"{'[' + fmt.format(lo) + '..' + fmt.format(hi) + ']':>18} "
              f"{'(' + fmt.format(min(d)) + '..' + fmt.format(max(d)) + ')':>20} {pct:>8}")
EOF
