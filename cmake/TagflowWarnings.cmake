# Warnings, sanitizers and code generation shared by every tagflow target.
add_library(tagflow_warnings INTERFACE)

# Note [Clearing an operation]
# An operation is pushed as an aggregate with designated initializers
# (`engine.push({.name = ..., .reads = {a}, .fn = ...})`). GCC 12 builds that
# temporary by clearing all of its 184 bytes first (the members made by a
# constructor, its variable lists and closure, leave its initializer
# incomplete), and for a clear of that size its generic tuning picks
# `rep stosq`, a microcoded string store whose start-up costs tens of
# cycles on AMD Zen, more than the rest of building the operation. Asked for
# 16-byte stores up to 256 bytes (memset itself beyond), `tagflow bench
# engine` went from 8.91 to 9.55 million operations/s on `random` and from
# 17.5 to 23.6 on `chain` (10 invocations of 3 runs, alternating).
# Every tagflow target is built so, including the operators, which push
# operations the same way; a program that pushes many operations itself
# gains the same from the same option (README.md, "Embedding tagflow").
# Sanitizer builds measure nothing and keep the default.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64"
   AND NOT TAGFLOW_SANITIZE)
  target_compile_options(tagflow_warnings INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-mmemset-strategy=vector_loop:256:noalign,libcall:-1:noalign>)
endif()
target_compile_options(tagflow_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
                            -Wold-style-cast -Wcast-align -Woverloaded-virtual
                            # GCC 12 flags members left out of designated initializers,
                            # the way operations are written (GCC 13 no longer does).
                            -Wno-missing-field-initializers>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${TAGFLOW_WERROR}>>:-Werror>
  $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<BOOL:${TAGFLOW_WERROR}>>:-Werror=all-warnings>)

if(TAGFLOW_SANITIZE)
  set(_san -fsanitize=${TAGFLOW_SANITIZE} -fno-omit-frame-pointer -g)
  if(TAGFLOW_SANITIZE MATCHES "undefined")
    list(APPEND _san -fno-sanitize-recover=undefined)
  endif()
  foreach(flag IN LISTS _san)
    add_compile_options($<$<COMPILE_LANGUAGE:CXX>:${flag}>)
  endforeach()
  add_link_options(${_san})
endif()
