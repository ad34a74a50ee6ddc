# Installation (`make install`, `cmake --install build [--prefix P]`) and the
# Debian package (`cd build && cpack -G DEB`):
#   bin/                       paced, pace_mf, pace_lda, pace_gen, pacectl
#   include/pace/client/pace.h and the common/ headers it includes
#   lib/libpace_*.a            the client library and the layers below it
#   lib/cmake/PaceDB/          PaceDBConfig.cmake: find_package(PaceDB), PaceDB::client
#   lib/pkgconfig/pacedb.pc    pkg-config --cflags --libs pacedb
# A program includes "client/pace.h" (or <pace/client/pace.h>) as in this tree.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(PACE_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/PaceDB)
set(PACE_INSTALL_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR}/pace)

foreach(_pace_bin paced pace_mf pace_lda pace_gen pacectl)
  if(TARGET ${_pace_bin})
    install(TARGETS ${_pace_bin} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endforeach()

if(TARGET pace_client)
  # Link order for pkg-config: each library before the ones it uses.
  set(_pace_client_libs pace_client pace_server pace_net pace_consistency pace_storage pace_common)
  foreach(_lib ${_pace_client_libs})
    string(REPLACE "pace_" "" _name ${_lib})
    if(NOT _name STREQUAL "client")
      set(_name "internal_${_name}")  # needed to link, not an API
    endif()
    set_target_properties(${_lib} PROPERTIES EXPORT_NAME ${_name})
  endforeach()
  add_library(PaceDB::client ALIAS pace_client)  # the same name in a parent project
  target_include_directories(pace_client INTERFACE
    $<INSTALL_INTERFACE:${PACE_INSTALL_INCLUDEDIR}>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  install(TARGETS ${_pace_client_libs} EXPORT PaceDBTargets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  # The public client headers: std + common/ only (docs/design.md, "Layers").
  install(FILES ${PROJECT_SOURCE_DIR}/client/pace.h DESTINATION ${PACE_INSTALL_INCLUDEDIR}/client)
  install(FILES
    ${PROJECT_SOURCE_DIR}/common/clock.h
    ${PROJECT_SOURCE_DIR}/common/schema.h
    ${PROJECT_SOURCE_DIR}/common/status.h
    DESTINATION ${PACE_INSTALL_INCLUDEDIR}/common)
  install(EXPORT PaceDBTargets NAMESPACE PaceDB:: DESTINATION ${PACE_INSTALL_CMAKEDIR})
  configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/PaceDBConfig.cmake.in
    ${PROJECT_BINARY_DIR}/PaceDBConfig.cmake
    INSTALL_DESTINATION ${PACE_INSTALL_CMAKEDIR})
  write_basic_package_version_file(${PROJECT_BINARY_DIR}/PaceDBConfigVersion.cmake
    VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
  install(FILES ${PROJECT_BINARY_DIR}/PaceDBConfig.cmake
    ${PROJECT_BINARY_DIR}/PaceDBConfigVersion.cmake
    DESTINATION ${PACE_INSTALL_CMAKEDIR})

  set(PACE_PC_LIBS "")
  foreach(_lib ${_pace_client_libs})
    string(APPEND PACE_PC_LIBS " -l${_lib}")
  endforeach()
  # Relocatable: the prefix is found from the .pc file's own place, so
  # `cmake --install build --prefix P` and the .deb both work.
  file(RELATIVE_PATH PACE_PC_TO_PREFIX "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
  string(REGEX REPLACE "/$" "" PACE_PC_TO_PREFIX "${PACE_PC_TO_PREFIX}")
  configure_file(${PROJECT_SOURCE_DIR}/cmake/pacedb.pc.in ${PROJECT_BINARY_DIR}/pacedb.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/pacedb.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endif()

if(NOT PACE_TOP_LEVEL)
  return()
endif()

# cpack -G DEB: one package with the binaries, headers and libraries.
set(CPACK_PACKAGE_NAME pacedb)
set(CPACK_PACKAGE_VENDOR "PaceDB")
set(CPACK_PACKAGE_CONTACT "PaceDB developers <pacedb@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "parameter server built like an embedded database (paced, pace_mf, pace_lda, pacectl, client library)")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
find_program(PACE_DPKG_SHLIBDEPS dpkg-shlibdeps)
if(PACE_DPKG_SHLIBDEPS)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)  # runtime library packages from the binaries
endif()
# To link the client library: the -dev packages its headers and archives need.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS
  "librocksdb-dev, libgoogle-glog-dev, libgflags-dev, libflatbuffers-dev, libboost-dev, pkg-config")
include(CPack)
