# `cmake --install` puts
#   lib/libtagflow.so.<version> (SONAME libtagflow.so.<major>), libtagflow.a,
#   lib/libtagflow_dist.so.<version>, libtagflow_dist.a    (MPI, opt in)
#   include/tagflow/...        the public headers only (not detail/, not ops/kernels/)
#   lib/cmake/tagflow/         a relocatable package: find_package(tagflow [COMPONENTS dist])
#   lib/pkgconfig/tagflow.pc   for projects that do not use CMake
#   bin/tagflow                the command line
# and nothing that names a path of the machine that built it.
include(CMakePackageConfigHelpers)

# Public headers ------------------------------------------------------------
# In this tree a header is included by its path from the root
# ("ops/ndarray.h"); installed, it lives under include/tagflow/, so its
# includes of other tagflow headers gain that prefix
# (cmake/TagflowPublicHeaders.cmake writes the installed copies, and refuses
# a public header that includes an internal one).
file(GLOB_RECURSE TAGFLOW_PUBLIC_HEADERS CONFIGURE_DEPENDS RELATIVE ${PROJECT_SOURCE_DIR}
     ${PROJECT_SOURCE_DIR}/engine/*.h ${PROJECT_SOURCE_DIR}/storage/*.h
     ${PROJECT_SOURCE_DIR}/ops/*.h ${PROJECT_SOURCE_DIR}/nn/*.h ${PROJECT_SOURCE_DIR}/tagflow/*.h)
list(FILTER TAGFLOW_PUBLIC_HEADERS EXCLUDE REGEX "(^|/)detail/|^ops/kernels/")
list(SORT TAGFLOW_PUBLIC_HEADERS)
set(TAGFLOW_PUBLIC_INCLUDE_DIR ${PROJECT_BINARY_DIR}/public-include)
set(stamp ${PROJECT_BINARY_DIR}/public-include.stamp)
add_custom_command(
  OUTPUT ${stamp}
  COMMAND ${CMAKE_COMMAND} -D SOURCE_DIR=${PROJECT_SOURCE_DIR}
          -D OUTPUT_DIR=${TAGFLOW_PUBLIC_INCLUDE_DIR}
          "-D HEADERS=${TAGFLOW_PUBLIC_HEADERS}"
          -P ${PROJECT_SOURCE_DIR}/cmake/TagflowPublicHeaders.cmake
  COMMAND ${CMAKE_COMMAND} -E touch ${stamp}
  DEPENDS ${TAGFLOW_PUBLIC_HEADERS} ${PROJECT_SOURCE_DIR}/cmake/TagflowPublicHeaders.cmake
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
  COMMENT "Public headers as installed"
  VERBATIM)
add_custom_target(tagflow_public_headers ALL DEPENDS ${stamp})
install(DIRECTORY ${TAGFLOW_PUBLIC_INCLUDE_DIR}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

# Libraries and the command line ---------------------------------------------
# One export set per library, so that the package looks for a library's
# dependencies only when a program asks for that library.
foreach(library tagflow tagflow_dist)
  foreach(kind shared static)
    install(TARGETS ${library}_${kind} EXPORT ${library}_${kind}_targets
            ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
            LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  endforeach()
endforeach()
if(TARGET tagflow_cli)
  install(TARGETS tagflow_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

# The CMake package ----------------------------------------------------------
set(TAGFLOW_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/tagflow)
foreach(library tagflow tagflow_dist)
  foreach(kind shared static)
    install(EXPORT ${library}_${kind}_targets NAMESPACE tagflow::
            FILE ${library}_${kind}_targets.cmake DESTINATION ${TAGFLOW_CMAKE_DIR})
  endforeach()
endforeach()
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/tagflowConfig.cmake.in
  ${PROJECT_BINARY_DIR}/tagflowConfig.cmake
  INSTALL_DESTINATION ${TAGFLOW_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/tagflowConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/tagflowConfig.cmake
              ${PROJECT_BINARY_DIR}/tagflowConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/TagflowFindCudaLibraries.cmake
        DESTINATION ${TAGFLOW_CMAKE_DIR})

# pkg-config -----------------------------------------------------------------
# The prefix is found from the .pc file's own place, so the tree may move.
file(RELATIVE_PATH TAGFLOW_PC_TO_PREFIX ${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig
     ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" TAGFLOW_PC_TO_PREFIX "${TAGFLOW_PC_TO_PREFIX}")
set(TAGFLOW_PC_REQUIRES_PRIVATE "tbb spdlog openblas zlib")
set(TAGFLOW_PC_LIBS_PRIVATE "")
if(TAGFLOW_HAVE_ONEDNN)
  set(TAGFLOW_PC_LIBS_PRIVATE "-ldnnl")  # oneDNN comes with no .pc file
endif()
if(TAGFLOW_CUDA)
  # CUDA's libraries come with no .pc files: named with the directory the
  # build found them in (used by `pkg-config --static` only).
  string(APPEND TAGFLOW_PC_LIBS_PRIVATE " -L${CUDAToolkit_LIBRARY_DIR} -lcudart -lcublas -lcudnn")
  if(TAGFLOW_NCCL)
    string(APPEND TAGFLOW_PC_LIBS_PRIVATE " -lnccl")
  endif()
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/tagflow.pc.in ${PROJECT_BINARY_DIR}/tagflow.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/tagflow.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
