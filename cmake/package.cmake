# `cpack` in a build folder: a Debian package of what cmake --install puts
# in place (cmake/install.cmake), under /usr. Everything in it finds its
# data relative to where it is installed (common/paths.hpp), so the package
# and `cmake --install --prefix` trees behave alike. Its dependencies are
# the Debian 12 packages the programs run with and the SDK builds with.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME tessera)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "Tessera")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Tessera T1 virtual platform and SDK: tessera-vp, its libraries, firmware BSP, kernel SDK")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "Tessera developers <tessera@localhost>")
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_PACKAGE_DEPENDS
    "libsystemc (>= 2.3.4), libfmt9, libboost-program-options1.74.0, zlib1g, libstdc++6, \
libsystemc-dev, libfmt-dev, nlohmann-json3-dev, cmake (>= 3.25), make, g++, pkg-config, \
gcc-riscv64-unknown-elf, picolibc-riscv64-unknown-elf")
include(CPack)
