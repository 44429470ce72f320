# `cmake --install` puts headers under include/tagflow/<folder>/, the library,
# and a package configuration so that an embedding program writes
#   find_package(tagflow REQUIRED)
#   target_link_libraries(app tagflow::tagflow)
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

foreach(folder engine storage ops nn)
  if(NOT IS_DIRECTORY ${CMAKE_SOURCE_DIR}/${folder})
    continue()
  endif()
  install(DIRECTORY ${CMAKE_SOURCE_DIR}/${folder}/
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tagflow/${folder}
          FILES_MATCHING PATTERN "*.h")
endforeach()
install(FILES ${CMAKE_SOURCE_DIR}/tagflow.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tagflow)

install(TARGETS tagflow EXPORT tagflowTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
if(TARGET tagflow_cli)
  install(TARGETS tagflow_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(EXPORT tagflowTargets NAMESPACE tagflow::
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tagflow)

configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/tagflowConfig.cmake.in
  ${CMAKE_BINARY_DIR}/tagflowConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tagflow)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/tagflowConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/tagflowConfig.cmake ${CMAKE_BINARY_DIR}/tagflowConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tagflow)
