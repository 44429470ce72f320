# The library's layers (DESIGN.md's table), each its own object library:
#
#   tagflow_add_layer(<name> SOURCES <files>... [LAYERS <lower layers>...]
#                     [PUBLIC_LIBS <libraries>...] [PRIVATE_LIBS <libraries>...])
#
# makes the target tagflow_<name>, which links the layers below it (LAYERS,
# by name: engine storage ops io data dist nn models) and the third-party
# libraries it uses itself. Every source includes headers by their path from
# the repository's root ("engine/engine.h"); scripts/check-layers.sh refuses
# an include that points up a layer. cmake/TagflowLibraries.cmake gathers the
# layers into libtagflow.so and libtagflow.a.

if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    set(TAGFLOW_TLS_OPTIONS -mtls-dialect=gnu2)
  else()
    set(TAGFLOW_TLS_OPTIONS -ftls-model=initial-exec)
  endif()
endif()

function(tagflow_add_layer name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "SOURCES;LAYERS;PUBLIC_LIBS;PRIVATE_LIBS")
  set(target tagflow_${name})
  add_library(${target} OBJECT ${arg_SOURCES})
  target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>)
  list(TRANSFORM arg_LAYERS PREPEND tagflow_)
  target_link_libraries(${target}
    PUBLIC ${arg_LAYERS} ${arg_PUBLIC_LIBS}
    PRIVATE ${arg_PRIVATE_LIBS} tagflow_warnings)
  # Note [Thread-local variables in the shared library]
  # Compiled for a shared library, each access to a thread_local (the
  # worker's identity, the object pool's caches, the autograd mode...) calls
  # __tls_get_addr: a 4-element `a + b` took 3,663 instructions through
  # libtagflow.so against 3,354 through libtagflow.a (callgrind). The
  # initial-exec model made each access one load (3,418), but it needs the
  # library's thread-locals in the static TLS block, which a library loaded
  # late with dlopen (the Python module, after PyTorch has taken the
  # surplus glibc keeps for that) does not get: the import failed with
  # "cannot allocate memory in static TLS block". TLS descriptors (GNU2
  # dialect) give both: glibc resolves each access once to the static block
  # where the library got room there (an indirect call that returns a
  # constant offset), and to dynamically allocated storage where it did not.
  # A 4-element `a + b` through libtagflow.so: 3,448 instructions against
  # initial-exec's 3,394 (callgrind, 40,000 operations, two runs each); in a
  # program linking libtagflow.a the linker turns them into plain loads.
  # GCC has the dialect on x86-64; clang has it from version 19 only, so
  # clang-14 (the fuzz targets) keeps initial-exec. Other processors keep the
  # compiler's default model.
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${TAGFLOW_TLS_OPTIONS}>)
  # What a program linking the static library must link as well.
  set_property(GLOBAL APPEND PROPERTY TAGFLOW_LAYER_LIBRARIES_${name}
               ${arg_PUBLIC_LIBS} ${arg_PRIVATE_LIBS})
endfunction()

# The third-party libraries of the layers `names`, without duplicates.
function(tagflow_layer_libraries out)
  set(libraries)
  foreach(name IN LISTS ARGN)
    get_property(own GLOBAL PROPERTY TAGFLOW_LAYER_LIBRARIES_${name})
    list(APPEND libraries ${own})
  endforeach()
  list(REMOVE_DUPLICATES libraries)
  set(${out} ${libraries} PARENT_SCOPE)
endfunction()
