#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Print the ORCA load reports headroomd publishes, with nothing but protobuf.

Every ``*.orca`` file in a directory (default /run/orca) holds one binary
``xds.data.orca.v3.OrcaLoadReport``. This script decodes each with the code
``protoc --python_out`` generates from headroom's .proto (see README.md) and
prints its utilization and whether it is fresh. It needs only the protobuf
runtime (Debian: python3-protobuf, used by /usr/bin/python3).

Exit status: 0 every report was read, 1 a report could not be read or there
was none, 2 the protobuf runtime or the generated code is missing.
"""

import argparse
import math
import os
import sys
import time

MAX_REPORT_BYTES = 64 * 1024  # a real report is a few hundred bytes

# Metadata headroom writes into named_metrics (docs/orca-files.md).
TIMESTAMP_MS = "headroom.timestamp_ms"
SEQ = "headroom.seq"
INTERVAL_MS = "headroom.interval_ms"
STOPPED = "headroom.stopped"


def fail_setup(message):
    print("read_reports.py: " + message, file=sys.stderr)
    sys.exit(2)


def load_generated(gen_dir):
    """Imports the generated module, or exits 2 saying what to install."""
    if gen_dir:
        sys.path.insert(0, gen_dir)
    try:
        import google.protobuf  # noqa: F401  (checked first: clearer message)
    except ImportError:
        fail_setup(
            "the protobuf runtime is missing for %s.\n"
            "Install it: apt-get install python3-protobuf (then run this with /usr/bin/python3)."
            % sys.executable
        )
    try:
        from xds.data.orca.v3 import orca_load_report_pb2
    except ImportError as e:
        fail_setup(
            "cannot import the generated code (%s).\n"
            "Generate it, then pass its directory with --gen:\n"
            "  protoc --python_out=DIR -I orca/proto orca/proto/xds/data/orca/v3/orca_load_report.proto"
            % e
        )
    return orca_load_report_pb2.OrcaLoadReport


def staleness(report, now_ms, max_intervals, min_age_ms):
    """(stale, text) by the rule in docs/orca-files.md ("Freshness")."""
    nm = report.named_metrics
    missing = [k for k in (TIMESTAMP_MS, SEQ, INTERVAL_MS) if k not in nm]
    if missing:
        return True, "STALE: no headroom metadata (%s)" % ", ".join(missing)
    age_ms = now_ms - nm[TIMESTAMP_MS]
    limit_ms = max(max_intervals * nm[INTERVAL_MS], min_age_ms)
    detail = "age %.2f s, seq %d, stale after %.2f s" % (age_ms / 1000, nm[SEQ], limit_ms / 1000)
    if nm.get(STOPPED, 0) != 0:
        return True, "STALE: headroomd stopped (%s)" % detail
    if abs(age_ms) > limit_ms:
        what = "from the future" if age_ms < 0 else "too old"
        return True, "STALE: %s (%s)" % (what, detail)
    return False, "fresh (%s)" % detail


def problems(report):
    """Values outside the ranges the ORCA message defines; a reader checks."""
    out = []
    top = {
        "cpu_utilization": (report.cpu_utilization, False),
        "mem_utilization": (report.mem_utilization, True),
        "application_utilization": (report.application_utilization, False),
    }
    for name, (v, fraction) in top.items():
        if not math.isfinite(v) or v < 0 or (fraction and v > 1):
            out.append("%s=%r" % (name, v))
    for k, v in report.utilization.items():
        if not math.isfinite(v) or v < 0 or v > 1:
            out.append("utilization[%s]=%r" % (k, v))
    return out


def read_report(path, report_type):
    with open(path, "rb") as f:
        data = f.read(MAX_REPORT_BYTES + 1)  # one more byte shows an oversized file
    if len(data) > MAX_REPORT_BYTES:
        raise ValueError("larger than %d bytes" % MAX_REPORT_BYTES)
    report = report_type()
    report.ParseFromString(data)  # raises DecodeError on bad bytes
    return report


def scopes(directory):
    """[(scope, path)]: node first, then the others by name; hidden files are
    the writer's temporaries and are skipped."""
    names = [n for n in os.listdir(directory) if n.endswith(".orca") and not n.startswith(".") and n != ".orca"]
    found = [(n[: -len(".orca")], os.path.join(directory, n)) for n in names]
    return sorted(found, key=lambda s: (s[0] != "node", s[0]))


def print_round(args, report_type):
    """Prints every report once; returns the exit status of this round."""
    try:
        found = scopes(args.dir)
    except OSError as e:
        print("%s: %s" % (args.dir, e.strerror), file=sys.stderr)
        return 1
    if not found:
        print("%s: no *.orca files" % args.dir, file=sys.stderr)
        return 1
    status = 0
    now_ms = time.time() * 1000
    for scope, path in found:
        try:
            r = read_report(path, report_type)
        except FileNotFoundError:
            continue  # gone between listing and reading
        except Exception as e:  # OSError, ValueError, protobuf's DecodeError
            print("scope %s  (%s)\n  ERROR: %s" % (scope, path, e))
            status = 1
            continue
        _, state = staleness(r, now_ms, args.max_intervals, args.min_age_ms)
        print("scope %s  (%s)" % (scope, path))
        print("  cpu_utilization          %.4f" % r.cpu_utilization)
        print("  mem_utilization          %.4f" % r.mem_utilization)
        print("  application_utilization  %.4f" % r.application_utilization)
        util = " ".join("%s=%.4f" % (k, v) for k, v in sorted(r.utilization.items()))
        print("  utilization              %s" % (util or "-"))
        print("  status                   %s" % state)
        bad = problems(r)
        if bad:
            print("  INVALID                  %s" % " ".join(bad))
    sys.stdout.flush()
    return status


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description="Print the ORCA load reports headroomd publishes.")
    p.add_argument("--dir", default="/run/orca", help="directory of *.orca files (default: %(default)s)")
    p.add_argument(
        "--gen",
        default=os.path.join(here, "gen"),
        help="directory protoc --python_out wrote the generated code to (default: %(default)s)",
    )
    p.add_argument("--once", action="store_true", help="print every report once and exit (same as --count 1)")
    p.add_argument("--count", type=int, default=0, help="print this many rounds, then exit; 0 runs until Ctrl-C")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between rounds (default: %(default)s)")
    p.add_argument(
        "--max-intervals",
        type=float,
        default=3.0,
        help="stale when older than this many headroom.interval_ms (default: %(default)s)",
    )
    p.add_argument(
        "--min-age-ms", type=float, default=1000.0, help="but never stale younger than this (default: %(default)s)"
    )
    args = p.parse_args()
    if args.count < 0 or args.interval <= 0:
        p.error("--count must be >= 0 and --interval > 0")
    rounds = 1 if args.once else args.count

    report_type = load_generated(args.gen)
    status = 0
    n = 0
    try:
        while True:
            if n > 0:
                print()  # rounds are separated by a blank line
            status = print_round(args, report_type)
            n += 1
            if rounds and n >= rounds:
                break
            time.sleep(args.interval)
    except KeyboardInterrupt:
        pass
    return status


if __name__ == "__main__":
    sys.exit(main())
