# SPDX-License-Identifier: Apache-2.0
# The .deb and .rpm of headroom, built by CPack from one build tree:
#   cmake -S . -B build -DCMAKE_INSTALL_PREFIX=/usr && cmake --build build
#   (cd build && cpack -G "DEB;RPM")      # or: cmake --build build -t packages
# One package, `headroom`: the daemon, headroomctl, the systemd unit,
# sysusers.d entry, configuration (a conffile), man pages, and the consumer
# library with its headers and pkg-config file. Details: packaging/README.md.
set(HEADROOM_PKG_DIR ${CMAKE_CURRENT_LIST_DIR})
if(NOT CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  # The packages install under /usr either way, but GNUInstallDirs chose the
  # library directory for this prefix (lib, not the Debian multiarch one).
  message(STATUS "headroom: configure with -DCMAKE_INSTALL_PREFIX=/usr for release packages (see packaging/README.md)")
endif()

# Man pages and the Debian changelog are installed gzipped (-n: no name or
# timestamp, so the bytes are reproducible).
set(HEADROOM_GZ_DIR ${PROJECT_BINARY_DIR}/packaging)
set(HEADROOM_GZ_FILES)
foreach(page headroomd.8 headroomctl.1 headroom.toml.5 changelog.Debian)
  if(page STREQUAL "changelog.Debian")
    set(in ${HEADROOM_PKG_DIR}/debian/changelog)
  else()
    set(in ${HEADROOM_PKG_DIR}/man/${page})
  endif()
  add_custom_command(OUTPUT ${HEADROOM_GZ_DIR}/${page}.gz
    COMMAND ${CMAKE_COMMAND} -E make_directory ${HEADROOM_GZ_DIR}
    COMMAND gzip -9nc ${in} > ${HEADROOM_GZ_DIR}/${page}.gz
    DEPENDS ${in} VERBATIM)
  list(APPEND HEADROOM_GZ_FILES ${HEADROOM_GZ_DIR}/${page}.gz)
endforeach()
add_custom_target(headroom_packaging_files ALL DEPENDS ${HEADROOM_GZ_FILES})

install(FILES ${HEADROOM_GZ_DIR}/headroomd.8.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man8)
install(FILES ${HEADROOM_GZ_DIR}/headroomctl.1.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(FILES ${HEADROOM_GZ_DIR}/headroom.toml.5.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man5)
install(FILES ${HEADROOM_PKG_DIR}/copyright ${HEADROOM_GZ_DIR}/changelog.Debian.gz
              ${PROJECT_SOURCE_DIR}/systemd/older-kernels.conf ${PROJECT_SOURCE_DIR}/systemd/prometheus.conf
              ${PROJECT_SOURCE_DIR}/systemd/oob.conf ${PROJECT_SOURCE_DIR}/systemd/oob-instances.conf
        DESTINATION ${CMAKE_INSTALL_DOCDIR})

# Files with fixed system paths (/etc, the systemd directories). They are
# installed only into a staging root (DESTDIR, as CPack does) or with the
# /usr prefix; `cmake --install --prefix SCRATCH` (the install tests) must
# never write into the real /etc.
install(CODE "
  if(\"\$ENV{DESTDIR}\" STREQUAL \"\" AND NOT CMAKE_INSTALL_PREFIX STREQUAL \"/usr\")
    message(STATUS \"headroom: prefix \${CMAKE_INSTALL_PREFIX} is not /usr and no DESTDIR: skipping /etc and systemd files\")
  else()
    file(INSTALL \"${PROJECT_SOURCE_DIR}/examples/headroom.toml\" DESTINATION /etc/headroom
         PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
    file(INSTALL \"${PROJECT_SOURCE_DIR}/systemd/headroomd.service\" DESTINATION /usr/lib/systemd/system
         PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
    file(INSTALL \"${PROJECT_SOURCE_DIR}/systemd/headroom.sysusers\" DESTINATION /usr/lib/sysusers.d
         RENAME headroom.conf PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
  endif()")

set(CPACK_PACKAGE_NAME headroom)
set(CPACK_PACKAGE_VENDOR "headroom")
set(CPACK_PACKAGE_CONTACT "headroom maintainers <maintainers@users.noreply.a-seed-7afc4ee0.example>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "node agent publishing ORCA load reports for load shedding")
set(CPACK_PACKAGE_DESCRIPTION
"headroom samples this machine once per interval (CPU of the host and of a
service cgroup, memory, and CPU, memory and IO pressure) and publishes the
results as ORCA load reports (xds.data.orca.v3.OrcaLoadReport) in /run/orca,
replaced atomically every 100 ms, for proxies and libraries that drop the
least important requests first when a service nears its limit.

This package contains the headroomd daemon and its systemd unit, the
headroomctl tool, and libheadroom-orca, the library (with headers and a
pkg-config file) that consumers use to read the reports.")
set(CPACK_PACKAGE_HOMEPAGE_URL "https://github.com/headroom/headroom")
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)

# Debian
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# The bundled library is found in the staging tree, not on the system.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${PROJECT_BINARY_DIR}/orca ${PROJECT_BINARY_DIR}/orca/grpc)
# ExecReload runs /bin/kill (procps); the maintainer scripts run
# systemd-sysusers and systemd-tmpfiles only when systemd is there.
set(CPACK_DEBIAN_PACKAGE_DEPENDS "procps")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
  ${HEADROOM_PKG_DIR}/debian/conffiles
  ${HEADROOM_PKG_DIR}/debian/postinst
  ${HEADROOM_PKG_DIR}/debian/prerm
  ${HEADROOM_PKG_DIR}/debian/postrm
  ${HEADROOM_PKG_DIR}/debian/triggers
  ${HEADROOM_PKG_DIR}/debian/shlibs)

# RPM (rpmbuild from Debian's rpm package works; see packaging/README.md)
set(CPACK_RPM_FILE_NAME RPM-DEFAULT)
set(CPACK_RPM_PACKAGE_RELEASE 1)
set(CPACK_RPM_PACKAGE_LICENSE "Apache-2.0 AND (GPL-2.0-only OR BSD-2-Clause)")
set(CPACK_RPM_PACKAGE_GROUP "System Environment/Daemons")
# Not relocatable: the unit, /etc and sysusers.d paths are fixed.
set(CPACK_PACKAGE_RELOCATABLE OFF)
set(CPACK_RPM_PACKAGE_RELOCATABLE OFF)
set(CPACK_RPM_USER_FILELIST "%config(noreplace) /etc/headroom/headroom.toml")
# Directories that belong to the filesystem and systemd packages, not ours.
set(CPACK_RPM_EXCLUDE_FROM_AUTO_FILELIST_ADDITION
  /usr/lib/systemd /usr/lib/systemd/system /usr/lib/sysusers.d
  /usr/share/man /usr/share/man/man1 /usr/share/man/man5 /usr/share/man/man8
  /usr/${CMAKE_INSTALL_LIBDIR} /usr/${CMAKE_INSTALL_LIBDIR}/pkgconfig /usr/share/doc)
set(CPACK_RPM_POST_INSTALL_SCRIPT_FILE ${HEADROOM_PKG_DIR}/rpm/post.sh)
set(CPACK_RPM_PRE_UNINSTALL_SCRIPT_FILE ${HEADROOM_PKG_DIR}/rpm/preun.sh)
set(CPACK_RPM_POST_UNINSTALL_SCRIPT_FILE ${HEADROOM_PKG_DIR}/rpm/postun.sh)
set(CPACK_RPM_SPEC_MORE_DEFINE "%define _build_id_links none")

include(CPack)

# `cmake --build BUILD -t packages`: both packages from this build.
add_custom_target(packages
  COMMAND ${CMAKE_CPACK_COMMAND} -G "DEB;RPM" --config ${PROJECT_BINARY_DIR}/CPackConfig.cmake
  WORKING_DIRECTORY ${PROJECT_BINARY_DIR}
  COMMENT "cpack: headroom .deb and .rpm"
  VERBATIM)
add_dependencies(packages headroomd headroomctl headroom-orca headroom_packaging_files)
