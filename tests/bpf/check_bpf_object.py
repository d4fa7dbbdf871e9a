#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The endpoint probe's BPF objects, one per architecture (probes/CMakeLists.txt),
checked on this host as far as a host of one architecture can check them.

    check_bpf_object.py --bpftool B --clang C --source DIR HOST_ARCH=OBJ [ARCH=OBJ...]

The first object is the one headroomd embeds (the host's architecture);
the others are built here for other kernels and cannot be loaded here. For
every object:
  - bpftool reads its BTF (btf dump) and libbpf opens it (gen skeleton);
  - it has .BTF.ext with CO-RE relocations, and the same programs and maps
    as the host's object;
  - its CO-RE relocations, resolved against this kernel's BTF
    (/sys/kernel/btf/vmlinux; bpftool gen min_core_btf, which relocates as
    the loader would): every one resolves for the host's architecture; for
    another, every one resolves except those on struct pt_regs, which has
    that architecture's layout (this kernel cannot have it: said below), and
    none names a field of this architecture's pt_regs.
And the system call numbers of probes/ebpf/arch/*.h against the kernel's
own tables as installed (<asm/unistd_64.h> for x86_64, the generic
<asm-generic/unistd.h> for arm64).
What cannot be checked here is printed as NOT CHECKED; a check that could
not run where it should fails the test."""

import argparse
import os
import re
import subprocess
import sys
import tempfile

HOST_BTF = "/sys/kernel/btf/vmlinux"
# Syscall numbers the arch headers define, and where the kernel's table is.
SYSCALLS = ["read", "write", "readv", "writev", "sendfile", "accept", "accept4", "sendto", "recvfrom",
            "sendmsg", "recvmsg"]
TABLES = {"x86_64": "#include <asm/unistd_64.h>\n",
          # the generic table with 64-bit longs (sendfile = __NR3264_sendfile)
          "arm64": "#define __BITS_PER_LONG 64\n#include <asm-generic/unistd.h>\n"}
# Relocations on these types depend on the architecture's struct pt_regs.
PT_REGS_TYPES = re.compile(r"^(pt_regs(___\w+)?|user_pt_regs)$")
# What each architecture's programs may read of pt_regs (through libbpf's
# PT_REGS_* and arch/<name>.h's HR_SYSCALL_NR).
PT_REGS_FIELDS = {"x86_64": {"di", "si", "dx", "orig_ax"},
                  "arm64": {"orig_x0", "regs[1]", "regs[2]", "syscallno"}}

failures = []


def fail(what):
    failures.append(what)
    print("FAIL: " + what)


def run(cmd):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def skeleton_names(bpftool, obj):
    """Programs and maps of the object, as libbpf opens it (the skeleton)."""
    r = run([bpftool, "gen", "skeleton", obj, "name", "check"])
    if r.returncode != 0:
        fail(f"{obj}: bpftool gen skeleton failed: {r.stderr.strip()}")
        return set(), set()
    progs = set(re.findall(r"struct bpf_program \*(\w+);", r.stdout))
    maps = set(re.findall(r"struct bpf_map \*(\w+);", r.stdout))
    return progs, maps


def relocations(bpftool, obj):
    """CO-RE relocations against this kernel's BTF: {(prog, n): (type, field, resolved)}."""
    with tempfile.TemporaryDirectory() as tmp:
        r = run([bpftool, "-d", "gen", "min_core_btf", HOST_BTF, os.path.join(tmp, "min.btf"), obj])
    if r.returncode != 0:
        fail(f"{obj}: bpftool gen min_core_btf failed: {r.stderr.strip()[-400:]}")
        return {}
    relos = {}
    spec = re.compile(r"prog '([^']+)': relo #(\d+): <(\w+)> \[\d+\] (?:struct|union|enum|typedef)? ?(\w+)(\S*)")
    for line in r.stderr.splitlines():
        m = spec.search(line)
        if m:
            key = (m.group(1), int(m.group(2)))
            relos.setdefault(key, [m.group(4), m.group(5).lstrip("."), None])
        m = re.search(r"prog '([^']+)': relo #(\d+): (matching candidate|no matching targets found)", line)
        if m:
            key = (m.group(1), int(m.group(2)))
            if key in relos and relos[key][2] is None:
                relos[key][2] = m.group(3) == "matching candidate"
    return {k: tuple(v) for k, v in relos.items()}


def check_syscall_numbers(clang, source, arch):
    """arch/<arch>.h's HR_NR_* equal the kernel's numbers, at compile time."""
    checks = "".join(f'_Static_assert(HR_NR_{n} == __NR_{n}, "{arch}: HR_NR_{n}");\n' for n in SYSCALLS)
    text = (TABLES[arch] + "#define BPF_CORE_READ(...) 0\n#define preserve_access_index\n"
            f'#include "arch/{arch}.h"\n' + checks)
    r = subprocess.run([clang, "-fsyntax-only", "-Wno-unknown-attributes", f"-I{source}/probes/ebpf", "-x", "c", "-"],
                       input=text, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        fail(f"probes/ebpf/arch/{arch}.h: system call numbers differ from the kernel's table: {r.stderr.strip()}")
    else:
        print(f"ok: probes/ebpf/arch/{arch}.h: {len(SYSCALLS)} system call numbers match the kernel's table")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bpftool", required=True)
    ap.add_argument("--clang", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("objects", nargs="+", help="ARCH=PATH, the host's first")
    args = ap.parse_args()
    objects = [tuple(o.split("=", 1)) for o in args.objects]
    host_arch = objects[0][0]

    for arch in sorted({a for a, _ in objects}):
        check_syscall_numbers(args.clang, args.source, arch)

    host_progs, host_maps = None, None
    for arch, obj in objects:
        if not os.path.exists(obj):
            fail(f"{arch}: {obj} was not built (cmake --build build --target headroom_ebpf)")
            continue
        r = run([args.bpftool, "btf", "dump", "file", obj])
        if r.returncode != 0 or "STRUCT 'hr_inflight'" not in r.stdout:
            fail(f"{arch}: bpftool btf dump file {obj}: {r.stderr.strip() or 'no struct hr_inflight in its BTF'}")
        sections = run(["readelf", "-S", "-W", obj]).stdout
        if ".BTF.ext" not in sections:
            fail(f"{arch}: {obj} has no .BTF.ext (no CO-RE relocations)")
        progs, maps = skeleton_names(args.bpftool, obj)
        if host_progs is None:
            host_progs, host_maps = progs, maps
            if not progs:
                fail(f"{arch}: no programs in {obj}")
        elif (progs, maps) != (host_progs, host_maps):
            fail(f"{arch}: programs {sorted(progs ^ host_progs)} or maps {sorted(maps ^ host_maps)} "
                 f"differ from the {host_arch} object's")
        print(f"ok: {arch}: {obj}: BTF reads, libbpf opens it: {len(progs)} programs, {len(maps)} maps")

        if not os.path.exists(HOST_BTF):
            fail(f"{arch}: {HOST_BTF} is missing: the CO-RE relocations cannot be checked (a kernel with "
                 "CONFIG_DEBUG_INFO_BTF=y is needed)")
            continue
        relos = relocations(args.bpftool, obj)
        if len(relos) < 20:
            fail(f"{arch}: only {len(relos)} CO-RE relocations read from bpftool's log (format changed?)")
            continue
        unknown = [k for k, v in relos.items() if v[2] is None]
        if unknown:
            fail(f"{arch}: {len(unknown)} relocations without a verdict in bpftool's log, e.g. {unknown[0]}")
        arch_specific = {k: v for k, v in relos.items() if PT_REGS_TYPES.match(v[0])}
        fields = {v[1] for v in arch_specific.values()}
        if not fields <= PT_REGS_FIELDS[arch]:
            fail(f"{arch}: reads pt_regs fields {sorted(fields - PT_REGS_FIELDS[arch])}, not its own "
                 f"{sorted(PT_REGS_FIELDS[arch])}")
        unresolved = sorted(f"{p} #{n}: {t}.{f}" for (p, n), (t, f, ok) in relos.items() if ok is False
                            and (arch == host_arch or not PT_REGS_TYPES.match(t)))
        if unresolved:
            fail(f"{arch}: CO-RE relocations that this kernel's BTF does not resolve: {unresolved[:5]}")
        else:
            print(f"ok: {arch}: {len(relos) - (0 if arch == host_arch else len(arch_specific))} CO-RE relocations "
                  f"resolve against {HOST_BTF}")
        if arch != host_arch:
            print(f"NOT CHECKED: {arch}: {len(arch_specific)} relocations on struct pt_regs "
                  f"({', '.join(sorted(fields))}) need a {arch} kernel's BTF, and loading the programs "
                  f"(the verifier) a {arch} kernel: docs/endpoints.md, \"Other architectures\"")

    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
