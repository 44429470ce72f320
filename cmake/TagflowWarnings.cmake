# Warnings and sanitizers shared by every tagflow target.
add_library(tagflow_warnings INTERFACE)
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
