# SPDX-License-Identifier: Apache-2.0
# headroom %post: the system user, the library cache, then systemd's preset
# policy decides on first install whether the unit is enabled (%systemd_post).
systemd-sysusers /usr/lib/sysusers.d/headroom.conf >/dev/null 2>&1 || :
/sbin/ldconfig || :
if [ "$1" -eq 1 ] && command -v systemctl >/dev/null 2>&1; then
  systemctl --no-reload preset headroomd.service >/dev/null 2>&1 || :
fi
