#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The .deb and .rpm built by CPack from this build tree: contents, modes,
# conffiles, maintainer scripts and scriptlets, dependencies, stripped
# binaries, lintian, and an rpm install into an alternate root.
#   packages_test.sh BUILD_DIR SOURCE_DIR
set -eu
build=$1 src=$2
. "$src/tests/packaging/lib.sh"
need cpack dpkg-deb dpkg-shlibdeps rpm rpmbuild lintian file
need_root
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$src/tests/packaging/build_packages.sh" "$build" "$work/out" >/dev/null
deb=$(ls "$work"/out/headroom_*.deb)
rpm=$(ls "$work"/out/headroom-*.rpm)
echo "built $(basename "$deb") $(basename "$rpm")"

# The files both packages must carry.
expected="/usr/sbin/headroomd /usr/bin/headroomctl /usr/lib/systemd/system/headroomd.service
/usr/lib/sysusers.d/headroom.conf /etc/headroom/headroom.toml /usr/share/man/man8/headroomd.8.gz
/usr/share/man/man1/headroomctl.1.gz /usr/share/man/man5/headroom.toml.5.gz
/usr/share/doc/headroom/copyright /usr/share/doc/headroom/changelog.Debian.gz
/usr/share/doc/headroom/older-kernels.conf /usr/share/doc/headroom/prometheus.conf
/usr/share/doc/headroom/oob.conf /usr/include/headroom/orca/headroom_orca.h
/usr/include/headroom/orca/orca_service.h /usr/include/headroom/orca/oob_streams.h
/usr/include/headroom/xds/service/orca/v3/orca.grpc.pb.h /usr/lib/headroom/headroom-oob.so"
lib_expected="libheadroom-orca.so.0 headroom-orca.pc libheadroom-orca-grpc.so.0 headroom-orca-grpc.pc"

# --- .deb
dpkg-deb -c "$deb" >"$work/deb.list"
for f in $expected; do grep -q " \.$f\$" "$work/deb.list" || fail ".deb lacks $f"; done
for f in $lib_expected; do grep -q "/$f" "$work/deb.list" || fail ".deb lacks $f"; done
# Everything root-owned; nothing group- or world-writable.
awk '$2 != "root/root" { print; bad = 1 } END { exit bad }' "$work/deb.list" || fail ".deb has files not owned by root"
awk 'substr($1, 1, 1) != "l" && (substr($1, 6, 1) == "w" || substr($1, 9, 1) == "w") { print; bad = 1 } END { exit bad }' \
  "$work/deb.list" || fail ".deb has group/world-writable files"
grep -q -- '-rw-r--r-- root/root .* \./etc/headroom/headroom.toml$' "$work/deb.list" || fail "headroom.toml is not 0644"
grep -q -- '-rwxr-xr-x root/root .* \./usr/sbin/headroomd$' "$work/deb.list" || fail "headroomd is not 0755"

dpkg-deb -e "$deb" "$work/control"
[ "$(cat "$work/control/conffiles")" = /etc/headroom/headroom.toml ] ||
  fail "conffiles: $(cat "$work/control/conffiles")"
for s in postinst prerm postrm; do
  [ -x "$work/control/$s" ] || fail "no executable $s"
  sh -n "$work/control/$s" || fail "$s: syntax"
done
grep -q 'systemd-sysusers headroom.conf' "$work/control/postinst" || fail "postinst does not create the user"
grep -q 'systemctl stop headroomd.service' "$work/control/prerm" || fail "prerm does not stop the unit"
grep -q 'rm -rf /etc/headroom' "$work/control/postrm" || fail "postrm purge does not remove /etc/headroom"
depends=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $depends"
# libtomlplusplus3: headroomd's configuration and libheadroom-orca's shedder_config.h.
for d in libprotobuf libspdlog libfmt libsystemd0 libc6 procps libgrpc++ libtomlplusplus; do
  case "$depends" in *"$d"*) ;; *) fail "Depends lacks $d (CPACK_DEBIAN_PACKAGE_SHLIBDEPS)" ;; esac
done
case "$depends" in *headroom*) fail "Depends names the package itself: $depends" ;; esac

dpkg-deb -x "$deb" "$work/root"
for b in usr/sbin/headroomd usr/bin/headroomctl usr/lib/headroom/headroom-oob.so; do
  file -L "$work/root/$b" | grep -q ', stripped' || fail "$b is not stripped: $(file "$work/root/$b")"
done
file -L "$work/root"/usr/lib/*/libheadroom-orca.so.0 "$work/root"/usr/lib/libheadroom-orca.so.0 2>/dev/null |
  grep -q ', stripped' || fail "libheadroom-orca.so.0 is not stripped"
# gRPC is mapped only into daemons that serve [oob]: headroomd loads the module.
if readelf -d "$work/root/usr/sbin/headroomd" | grep -q 'NEEDED.*libgrpc'; then
  fail "headroomd links gRPC itself; only /usr/lib/headroom/headroom-oob.so should"
fi
readelf -d "$work/root/usr/lib/headroom/headroom-oob.so" | grep -q 'NEEDED.*libgrpc++' || fail "headroom-oob.so does not link gRPC"
gzip -t "$work/root"/usr/share/man/man*/*.gz "$work/root/usr/share/doc/headroom/changelog.Debian.gz"
cmp -s "$work/root/usr/lib/systemd/system/headroomd.service" "$src/systemd/headroomd.service" ||
  fail "the packaged unit differs from systemd/headroomd.service"

# lintian: no errors; every warning is one packaging/README.md justifies.
lintian --tag-display-limit 0 "$deb" >"$work/lintian.txt" 2>&1 || true
cat "$work/lintian.txt"
if grep -q '^E: ' "$work/lintian.txt"; then fail "lintian errors"; fi
for tag in $(sed -n 's/^W: [^ ]* \([a-z0-9-]*\).*/\1/p' "$work/lintian.txt" | sort -u); do
  grep -q "\`$tag\`" "$src/packaging/README.md" || fail "lintian warning $tag is not justified in packaging/README.md"
done
echo "lintian: no errors; warnings justified"

# --- .rpm
rpm -qlp "$rpm" >"$work/rpm.list"
for f in $expected; do grep -qx "$f" "$work/rpm.list" || fail ".rpm lacks $f"; done
for f in $lib_expected; do grep -q "/$f\$" "$work/rpm.list" || fail ".rpm lacks $f"; done
# Directories owned by the filesystem or systemd packages must not be claimed.
for d in /etc /usr /usr/lib /usr/lib/systemd /usr/lib/systemd/system /usr/share/man /usr/share/man/man8 /usr/include; do
  if grep -qx "$d" "$work/rpm.list"; then fail ".rpm claims the system directory $d"; fi
done
rpm -qp --qf '[%{FILEMODES:perms} %{FILEUSERNAME}:%{FILEGROUPNAME} %{FILEFLAGS:fflags} %{FILENAMES}\n]' "$rpm" \
  >"$work/rpm.modes"
grep -Eq '^-rw-r--r-- root:root [a-z]*c[a-z]*n[a-z]* /etc/headroom/headroom.toml$' "$work/rpm.modes" ||
  fail "headroom.toml is not %config(noreplace) 0644 root: $(grep headroom.toml "$work/rpm.modes")"
grep -Eq '^-rwxr-xr-x root:root +/usr/sbin/headroomd$' "$work/rpm.modes" || fail "headroomd mode: $(grep sbin "$work/rpm.modes")"
awk '$2 != "root:root" { print; bad = 1 } END { exit bad }' "$work/rpm.modes" || fail ".rpm has files not owned by root"
rpm -qp --scripts "$rpm" >"$work/rpm.scripts"
for s in 'systemd-sysusers' 'preset headroomd.service' 'disable --now headroomd.service' 'try-restart headroomd.service'; do
  grep -q "$s" "$work/rpm.scripts" || fail "rpm scriptlets lack '$s'"
done
rpm -qpR "$rpm" >"$work/rpm.requires"
grep -q '^libprotobuf.so.32' "$work/rpm.requires" || fail "rpm requires lack libprotobuf: $(cat "$work/rpm.requires")"

# Installed into an alternate root (no dependencies there, and no shell for
# scriptlets: --noscripts), then erased.
mkdir -p "$work/rpmroot"
rpm -i --nodeps --noscripts --root "$work/rpmroot" "$rpm"
rpm -q --root "$work/rpmroot" headroom >/dev/null || fail "rpm -q after install"
for f in /usr/sbin/headroomd /etc/headroom/headroom.toml /usr/lib/systemd/system/headroomd.service; do
  [ -f "$work/rpmroot$f" ] || fail "rpm --root install lacks $f"
done
[ "$(stat -c %a "$work/rpmroot/usr/sbin/headroomd")" = 755 ] || fail "installed headroomd mode"
rpm -e --nodeps --noscripts --root "$work/rpmroot" headroom
[ ! -e "$work/rpmroot/usr/sbin/headroomd" ] || fail "rpm -e left headroomd"
echo "rpm: contents, modes, %config(noreplace), scriptlets, requires, --root install and erase ok"
