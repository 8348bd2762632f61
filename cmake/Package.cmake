# The Debian package, made by CPack's DEB generator (scripts/package.sh is the one command):
#   /usr/bin/delayd, /usr/bin/delayctl            stripped
#   /etc/delayd/delayd.toml                       the commented configuration, a conffile
#   /lib/systemd/system/delayd.service            the unit (user delayd, restart on failure, hardening)
#   /usr/share/doc/delayd/README.md, CHANGELOG.md
# and the maintainer scripts of deploy/debian/ (postinst adds the system user delayd). Its
# version is project()'s; its Depends are the shared libraries' packages, found by
# dpkg-shlibdeps (Debian's dpkg-dev), plus adduser (postinst) and tzdata (cron time zones), and
# librdkafka at DELAYD_LIBRDKAFKA_NO_SPIN or DELAYD_LIBRDKAFKA_KEEPS_ASSIGNMENT or later when the
# build's librdkafka is (below).
# tests/deploy/package_test.sh builds it, installs it, runs it as the unit would and removes it.
install(TARGETS delayd delayctl RUNTIME DESTINATION bin)
install(FILES ${PROJECT_SOURCE_DIR}/deploy/debian/delayd.toml DESTINATION /etc/delayd)
install(FILES ${PROJECT_SOURCE_DIR}/deploy/debian/delayd.service DESTINATION /lib/systemd/system)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/CHANGELOG.md DESTINATION share/doc/delayd)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME delayd)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_CONTACT "delayd maintainers <maintainers@users.noreply.a-seed-c4667491.example>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "delayed-message broker on Kafka and Redis")
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "delayd reads delayed messages from a Kafka ingest topic, keeps each job durably in Redis,
holds the jobs due soon in a timing wheel and publishes each one to its ready topic when it
is due. This package holds delayd, delayctl, a systemd unit and its configuration.")
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # delayd_<version>_<arch>.deb
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser, tzdata")
# exactly_once wants a librdkafka that does not spin (DELAYD_LIBRDKAFKA_NO_SPIN, CMakeLists.txt).
# Built against one, the package asks for one, so that an older one cannot satisfy it; built
# where the distribution has only older ones (Debian 12: 2.0.2) it cannot ask, and delayd warns
# at start-up instead (docs/operating/package.md).
# The same for a consumer that keeps its partitions through a refused commit
# (DELAYD_LIBRDKAFKA_KEEPS_ASSIGNMENT, the later of the two): the latest the build's librdkafka
# reaches is the one asked for.
set(rdkafka_wanted "")
foreach(version ${DELAYD_LIBRDKAFKA_NO_SPIN} ${DELAYD_LIBRDKAFKA_KEEPS_ASSIGNMENT})
  if(RDKAFKA_rdkafka_VERSION VERSION_GREATER_EQUAL version)
    set(rdkafka_wanted ${version})
  endif()
endforeach()
if(rdkafka_wanted)
  string(APPEND CPACK_DEBIAN_PACKAGE_DEPENDS
         ", librdkafka1 (>= ${rdkafka_wanted}), librdkafka++1 (>= ${rdkafka_wanted})")
endif()
message(STATUS "delayd package: librdkafka ${RDKAFKA_rdkafka_VERSION}; Depends: ${CPACK_DEBIAN_PACKAGE_DEPENDS} and what dpkg-shlibdeps finds")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
  ${PROJECT_SOURCE_DIR}/deploy/debian/postinst ${PROJECT_SOURCE_DIR}/deploy/debian/prerm
  ${PROJECT_SOURCE_DIR}/deploy/debian/postrm ${PROJECT_SOURCE_DIR}/deploy/debian/conffiles)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)
set(CPACK_WARN_ON_ABSOLUTE_INSTALL_DESTINATION OFF)  # /etc and /lib/systemd are where they belong
include(CPack)
