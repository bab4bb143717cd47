# Installation and packaging: headers, libattnsel.so (SOVERSION = major) and libattnsel.a,
# the attnsel command, a CMake package (attnsel::attnsel, attnsel::static,
# attnsel::plugin_sdk; SameMajorVersion) and a pkg-config file. Only the public API is
# exported from the shared library (ATTNSEL_API, include/attnsel/export.hpp).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(ATTNSEL_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/attnsel)
set(ATTNSEL_INSTALL_PLUGINDIR ${CMAKE_INSTALL_LIBDIR}/attnsel/plugins)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/attnsel ${PROJECT_BINARY_DIR}/include/attnsel
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT devel)

# The shared library and the plugin headers: what find_package(attnsel) always provides.
install(TARGETS attnsel attnsel_plugin_sdk EXPORT attnselTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT devel
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT attnselTargets NAMESPACE attnsel:: DESTINATION ${ATTNSEL_INSTALL_CMAKEDIR} COMPONENT devel)

# The static library links what attnsel itself links, so it is a component of its own
# (find_package(attnsel COMPONENTS static)) whose dependencies are found only when asked.
target_link_libraries(attnsel_static PRIVATE fmt::fmt spdlog::spdlog OpenMP::OpenMP_CXX PkgConfig::HWY ${CMAKE_DL_LIBS})
if(ATTNSEL_HAVE_CUDA)
  target_link_libraries(attnsel_static PRIVATE CUDA::cudart_static)
endif()
install(TARGETS attnsel_static EXPORT attnselStaticTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT devel
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT attnselStaticTargets NAMESPACE attnsel:: DESTINATION ${ATTNSEL_INSTALL_CMAKEDIR} COMPONENT devel)

if(TARGET attnsel_cli)
  install(TARGETS attnsel_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
endif()

# Where plugins are searched for by a bare name (src/plugin/names.cpp).
install(DIRECTORY DESTINATION ${ATTNSEL_INSTALL_PLUGINDIR} COMPONENT runtime)

set(ATTNSEL_CONFIG_HAVE_CUDA ${ATTNSEL_HAVE_CUDA})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/attnselConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/attnselConfig.cmake
                              INSTALL_DESTINATION ${ATTNSEL_INSTALL_CMAKEDIR}
                              PATH_VARS CMAKE_INSTALL_INCLUDEDIR ATTNSEL_INSTALL_PLUGINDIR)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/attnselConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/attnselConfig.cmake ${PROJECT_BINARY_DIR}/attnselConfigVersion.cmake
        DESTINATION ${ATTNSEL_INSTALL_CMAKEDIR} COMPONENT devel)

# pkg-config: relocatable (paths relative to the .pc file), so an install with
# `cmake --install --prefix DIR` works wherever DIR is.
file(RELATIVE_PATH ATTNSEL_PC_PREFIX_FROM_PCDIR "/root/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/root")
set(ATTNSEL_PC_PRIVATE_LIBS "${OpenMP_CXX_FLAGS} -l${CMAKE_DL_LIBS}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/attnsel.pc.in ${PROJECT_BINARY_DIR}/attnsel.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/attnsel.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT devel)
