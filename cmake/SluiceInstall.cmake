include_guard(GLOBAL)
include(CMakePackageConfigHelpers)

install(TARGETS sluice_headers EXPORT sluiceTargets)
install(EXPORT sluiceTargets NAMESPACE sluice:: DESTINATION ${SLUICE_INSTALL_CMAKEDIR})
# The components with a dependency each get their own export file, which the package config loads only
# when that component is asked for (see sluiceConfig.cmake.in).
foreach(component IN ITEMS fit io all cbc)
  if(TARGET sluice_${component})
    install(TARGETS sluice_${component} EXPORT sluice-${component}-targets)
    install(EXPORT sluice-${component}-targets NAMESPACE sluice:: DESTINATION ${SLUICE_INSTALL_CMAKEDIR})
  endif()
endforeach()
install(DIRECTORY include/sluice DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY data/ DESTINATION ${SLUICE_INSTALL_DATADIR})

configure_package_config_file(cmake/sluiceConfig.cmake.in
  ${PROJECT_BINARY_DIR}/sluiceConfig.cmake
  INSTALL_DESTINATION ${SLUICE_INSTALL_CMAKEDIR}
  PATH_VARS SLUICE_INSTALL_DATADIR)
# Header-only: the package fits any architecture.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/sluiceConfigVersion.cmake
  COMPATIBILITY SameMinorVersion ARCH_INDEPENDENT)
install(FILES ${PROJECT_BINARY_DIR}/sluiceConfig.cmake ${PROJECT_BINARY_DIR}/sluiceConfigVersion.cmake
  DESTINATION ${SLUICE_INSTALL_CMAKEDIR})
