# The layers gathered into the libraries a program links:
#   libtagflow.so.<major> (target tagflow_shared) and libtagflow.a
#   (tagflow_static): every layer but MPI;
#   libtagflow_dist.so.<major> and libtagflow_dist.a: MPI across processes,
#   on top of libtagflow.
# Both kinds are built from the same objects (compiled once, position
# independent). In this tree, tagflow::tagflow and tagflow::dist are the
# static ones: the command line and the tests link them. The installed
# package offers both (cmake/tagflowConfig.cmake.in).

set(TAGFLOW_CORE_LAYERS engine storage ops io data dist nn models)

function(tagflow_add_libraries name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "LAYERS")
  # Linked directly, an object library gives its objects; through another
  # target, only its usage requirements. The top layer is public: it brings
  # the include directory and, through the layers below, their libraries.
  set(layers ${arg_LAYERS})
  list(POP_BACK layers top)
  list(TRANSFORM layers REPLACE "(.+)" "$<BUILD_INTERFACE:tagflow_\\1>")
  tagflow_layer_libraries(third_party ${arg_LAYERS})
  foreach(kind shared static)
    string(TOUPPER ${kind} type)
    add_library(${name}_${kind} ${type})
    target_link_libraries(${name}_${kind}
      PUBLIC $<BUILD_INTERFACE:tagflow_${top}> $<INSTALL_INTERFACE:fmt::fmt>
             $<INSTALL_INTERFACE:Threads::Threads>
      PRIVATE ${layers})
    target_include_directories(${name}_${kind} INTERFACE
      $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
    target_compile_features(${name}_${kind} INTERFACE cxx_std_20)
    set_target_properties(${name}_${kind} PROPERTIES OUTPUT_NAME ${name} EXPORT_NAME ${kind})
  endforeach()
  # The layers bring their third-party libraries to the build's own links;
  # installed, the static library names them for whoever links it (the
  # shared one has them already).
  target_link_libraries(${name}_static PRIVATE ${third_party})
  set_target_properties(${name}_shared PROPERTIES
    VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}
    # Calls inside the library bind inside it: no interposition, no PLT hop.
    LINK_OPTIONS "LINKER:-Bsymbolic-functions")
  if(NOT TAGFLOW_SANITIZE)
    # Every symbol it needs is resolved when it is linked. (A sanitizer's
    # runtime comes with the program instead: clang leaves it out of shared
    # libraries.)
    target_link_options(${name}_shared PRIVATE LINKER:--no-undefined)
  endif()
endfunction()

tagflow_add_libraries(tagflow LAYERS ${TAGFLOW_CORE_LAYERS})
tagflow_add_libraries(tagflow_dist LAYERS dist_mpi)
set_target_properties(tagflow_dist_shared PROPERTIES EXPORT_NAME dist_shared)
set_target_properties(tagflow_dist_static PROPERTIES EXPORT_NAME dist_static)
target_link_libraries(tagflow_dist_shared PUBLIC tagflow_shared)
target_link_libraries(tagflow_dist_static PUBLIC tagflow_static)

add_library(tagflow::tagflow ALIAS tagflow_static)
add_library(tagflow::dist ALIAS tagflow_dist_static)
