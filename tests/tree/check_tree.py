#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The tree's rules (docs/architecture.md), checked on the sources:

- floors: a product file includes only files of its own room or of a room
  on a lower floor (agent/daemon and agent/ctl stand side by side and never
  include each other); examples/ are consumers: they include only orca/;
- size: no product file over 650 lines (the BPF programs and the checked-in
  vmlinux.h aside), no function over 100 lines outside tests and benches
  (function extents from universal-ctags).

Usage: check_tree.py SOURCE_DIR. Exit 1 with one line per breach, naming the
file, the line and what to do.
"""
import os
import re
import shutil
import subprocess
import sys

# Rooms, bottom up. A room is a path prefix; the longest prefix wins.
FLOORS = [
    ("orca/", 1),
    ("probes/", 2),
    ("publishers/", 3),
    ("agent/config/", 4),
    ("agent/signals/", 5),
    ("agent/daemon/", 6),
    ("agent/ctl/", 6),
]
# Where an include path points, by its first component(s).
INCLUDE_ROOTS = [
    ("headroom/orca/", "orca/"),
    ("xds/", "orca/"),  # the generated protobuf and gRPC code of orca/proto
    ("orca/", "orca/"),
    ("probes/", "probes/"),
    ("publishers/", "publishers/"),
    ("agent/config/", "agent/config/"),
    ("agent/signals/", "agent/signals/"),
    ("agent/daemon/", "agent/daemon/"),
    ("agent/ctl/", "agent/ctl/"),
]
SOURCE_EXT = (".h", ".cc", ".c")
MAX_FILE_LINES = 650
MAX_FUNCTION_LINES = 100
SIZE_EXEMPT = ("probes/ebpf/vmlinux.h", ".bpf.c", ".bpf.h")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def room_of(path):
    best = None
    for prefix, floor in FLOORS:
        if path.startswith(prefix) and (best is None or len(prefix) > len(best[0])):
            best = (prefix, floor)
    return best


def target_room(include, including_file):
    for prefix, room in INCLUDE_ROOTS:
        if include.startswith(prefix):
            return room
    # A path relative to the including file (probes/ebpf's own headers).
    room = room_of(os.path.normpath(os.path.join(os.path.dirname(including_file), include)))
    return room[0] if room else None


def product_files(root):
    out = []
    for top in ("orca", "probes", "publishers", "agent", "examples"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for f in files:
                if f.endswith(SOURCE_EXT):
                    out.append(os.path.relpath(os.path.join(dirpath, f), root))
    return sorted(out)


def floor_breaches(root, files):
    floor = dict(FLOORS)
    breaches = []
    for f in files:
        text = open(os.path.join(root, f), encoding="utf-8", errors="replace").read()
        own = room_of(f)
        for m in INCLUDE.finditer(text):
            inc = m.group(1)
            target = target_room(inc, f)
            if target is None:
                continue
            line = text.count("\n", 0, m.start()) + 1
            if f.startswith("examples/"):
                if target != "orca/":
                    breaches.append(f"{f}:{line}: includes {inc}: an example is a consumer and includes only "
                                    "orca/ (libheadroom-orca)")
                continue
            if own is None or target == own[0]:
                continue
            if floor[target] >= own[1]:
                breaches.append(f"{f}:{line}: includes {inc} ({target}, floor {floor[target]}) from {own[0]} "
                                f"(floor {own[1]}): an include goes down a floor, never up or sideways; move the "
                                "shared part down (docs/architecture.md)")
    return breaches


def size_breaches(root, files):
    breaches = []
    for f in files:
        if f.endswith(SIZE_EXEMPT) or f == "probes/ebpf/vmlinux.h":
            continue
        n = sum(1 for _ in open(os.path.join(root, f), encoding="utf-8", errors="replace"))
        if n > MAX_FILE_LINES:
            breaches.append(f"{f}: {n} lines, over {MAX_FILE_LINES}: split it along what it does")
    return breaches


def function_breaches(root, files):
    ctags = shutil.which("ctags")
    if ctags is None:
        return None
    candidates = [f for f in files if f != "probes/ebpf/vmlinux.h"]
    out = subprocess.run([ctags, "-x", "--_xformat=%N %F %n %{end}", "--kinds-c++=f", "--kinds-c=f",
                          "--fields=+ne", "--langmap=c++:+.h", "-L", "-"],
                         input="\n".join(candidates), capture_output=True, text=True, cwd=root)
    if out.returncode != 0:
        raise SystemExit(f"ctags failed: {out.stderr.strip()}")
    breaches = []
    for row in out.stdout.splitlines():
        parts = row.split()
        if len(parts) != 4 or not parts[3].isdigit():
            continue
        name, path, start, end = parts[0], parts[1], int(parts[2]), int(parts[3])
        if end - start > MAX_FUNCTION_LINES:
            breaches.append(f"{path}:{start}: {name} is {end - start} lines, over {MAX_FUNCTION_LINES}: "
                            "split it into steps that each do one thing")
    return breaches


def main():
    if len(sys.argv) != 2:
        print("usage: check_tree.py SOURCE_DIR", file=sys.stderr)
        return 2
    root = sys.argv[1]
    files = product_files(root)
    breaches = floor_breaches(root, files) + size_breaches(root, files)
    functions = function_breaches(root, files)
    if functions is None:
        # Loud: the check is required in CI (packaging/install-build-deps.sh installs it).
        print("FAIL: universal-ctags (ctags) is not installed: function lengths cannot be checked; "
              "apt-get install universal-ctags", file=sys.stderr)
        return 1
    breaches += functions
    for b in breaches:
        print(b)
    print(f"{len(files)} product files: {len(breaches)} breach(es) of the tree's rules")
    return 1 if breaches else 0


if __name__ == "__main__":
    sys.exit(main())
