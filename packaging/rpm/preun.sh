# SPDX-License-Identifier: Apache-2.0
# headroom %preun: on erase (not upgrade), disable and stop (%systemd_preun).
if [ "$1" -eq 0 ] && command -v systemctl >/dev/null 2>&1; then
  systemctl --no-reload disable --now headroomd.service >/dev/null 2>&1 || :
fi
