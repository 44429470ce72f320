# Writes the public headers as they are installed: run as
#   cmake -D SOURCE_DIR=<tree> -D OUTPUT_DIR=<dir> -D HEADERS=<a;b;...> -P TagflowPublicHeaders.cmake
# Each header <path> becomes <dir>/tagflow/<path>, its includes of tagflow
# headers ("ops/ndarray.h") prefixed with tagflow/ ("tagflow/ops/ndarray.h");
# tagflow/<name>.h stays tagflow/<name>.h. A public header that includes an
# internal one (detail/, ops/kernels/) or one that is not public is an error:
# it would not compile once installed.
cmake_minimum_required(VERSION 3.25)
file(REMOVE_RECURSE ${OUTPUT_DIR})
set(public ${HEADERS})
foreach(header IN LISTS HEADERS)
  file(STRINGS ${SOURCE_DIR}/${header} lines REGEX "^#include \"")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "^#include \"([^\"]+)\".*" "\\1" included "${line}")
    if(NOT included IN_LIST public)
      message(FATAL_ERROR "${header}: includes \"${included}\", which is not a public header; "
                          "public headers may include only public ones (not detail/ or ops/kernels/)")
    endif()
  endforeach()
  file(READ ${SOURCE_DIR}/${header} text)
  string(REGEX REPLACE "#include \"(engine|storage|ops|nn)/" "#include \"tagflow/\\1/" text "${text}")
  if(header MATCHES "^tagflow/")
    set(destination ${OUTPUT_DIR}/${header})
  else()
    set(destination ${OUTPUT_DIR}/tagflow/${header})
  endif()
  file(WRITE ${destination} "${text}")
endforeach()
