# `cmake --install` of the runtime (included by runtime/CMakeLists.txt):
#   include/mla/runtime/      the public headers (mla_runtime.h is the C API)
#   lib/libmla_runtime.so.*   the shared library: the C API only
#   lib/libmla_runtime.a      the static archive: the C++ API and the C API
#   bin/mla-run, mla-bench
#   lib/cmake/mla_runtime/    find_package(mla_runtime CONFIG): mla::runtime
#                             (shared, C API), mla::runtime_static (static)
#   lib/pkgconfig/mla_runtime.pc
#   lib/pythonX.Y/site-packages/mla/   the Python package (ctypes over the
#                             shared library; InstallPython.cmake)
# The paths follow GNUInstallDirs (CMAKE_INSTALL_LIBDIR, ...); everything is
# relative to the prefix, so `cmake --install BUILD --prefix DIR` may pick
# another one.
include(CMakePackageConfigHelpers)

set(MLA_RUNTIME_CMAKE_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/mla_runtime")

set_target_properties(mla_runtime PROPERTIES EXPORT_NAME runtime_static)
set_target_properties(mla_runtime_shared PROPERTIES EXPORT_NAME runtime)
install(TARGETS mla_runtime mla_runtime_shared EXPORT mla_runtime_targets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS mla-run mla-bench RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY "${CMAKE_CURRENT_SOURCE_DIR}/include/mla"
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h" PATTERN "*.def")

install(EXPORT mla_runtime_targets NAMESPACE mla::
  FILE mla_runtimeTargets.cmake DESTINATION ${MLA_RUNTIME_CMAKE_DIR})
configure_package_config_file(
  "${CMAKE_CURRENT_SOURCE_DIR}/cmake/mla_runtimeConfig.cmake.in"
  "${CMAKE_CURRENT_BINARY_DIR}/mla_runtimeConfig.cmake"
  INSTALL_DESTINATION ${MLA_RUNTIME_CMAKE_DIR})
write_basic_package_version_file(
  "${CMAKE_CURRENT_BINARY_DIR}/mla_runtimeConfigVersion.cmake"
  VERSION ${MLA_RUNTIME_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES
  "${CMAKE_CURRENT_BINARY_DIR}/mla_runtimeConfig.cmake"
  "${CMAKE_CURRENT_BINARY_DIR}/mla_runtimeConfigVersion.cmake"
  DESTINATION ${MLA_RUNTIME_CMAKE_DIR})

# pkg-config: relocatable (the prefix is found from the .pc file's place).
file(RELATIVE_PATH MLA_PC_PREFIX "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig"
     "/prefix")
string(REGEX REPLACE "/$" "" MLA_PC_PREFIX "${MLA_PC_PREFIX}")
configure_file("${CMAKE_CURRENT_SOURCE_DIR}/cmake/mla_runtime.pc.in"
               "${CMAKE_CURRENT_BINARY_DIR}/mla_runtime.pc" @ONLY)
install(FILES "${CMAKE_CURRENT_BINARY_DIR}/mla_runtime.pc"
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)


include(${CMAKE_CURRENT_LIST_DIR}/InstallPython.cmake)
