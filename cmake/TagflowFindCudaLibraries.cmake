# The CUDA libraries tagflow links, as imported targets: tagflow::cudart,
# tagflow::cublas, tagflow::cudnn and (when found) tagflow::nccl, from their
# headers and shared libraries next to the CUDA toolkit
# (CUDAToolkit_ROOT, $CUDA_PATH, /usr/local/cuda) or in the system's
# directories. Used by the build and by the installed package
# (tagflowConfig.cmake), so that the exported static library names these
# targets, never a path of the machine that built it, and a program linking
# it needs no find_package(CUDAToolkit) of its own.

set(_tagflow_cuda_roots ${CUDAToolkit_ROOT} $ENV{CUDA_PATH} /usr/local/cuda)
set(_tagflow_cuda_include_hints ${CUDAToolkit_INCLUDE_DIRS})
set(_tagflow_cuda_library_hints ${CUDAToolkit_LIBRARY_DIR})
foreach(root IN LISTS _tagflow_cuda_roots)
  list(APPEND _tagflow_cuda_include_hints ${root}/include)
  list(APPEND _tagflow_cuda_library_hints ${root}/lib64 ${root}/lib)
endforeach()

# name;header;library
foreach(_tagflow_spec IN ITEMS "cudart;cuda_runtime_api.h;cudart" "cublas;cublas_v2.h;cublas"
                               "cudnn;cudnn.h;cudnn" "nccl;nccl.h;nccl")
  list(GET _tagflow_spec 0 _tagflow_name)
  list(GET _tagflow_spec 1 _tagflow_header)
  list(GET _tagflow_spec 2 _tagflow_library)
  if(TARGET tagflow::${_tagflow_name})
    continue()
  endif()
  string(TOUPPER ${_tagflow_name} _tagflow_upper)
  find_path(TAGFLOW_${_tagflow_upper}_INCLUDE_DIR ${_tagflow_header}
            HINTS ${_tagflow_cuda_include_hints})
  find_library(TAGFLOW_${_tagflow_upper}_LIBRARY ${_tagflow_library}
               HINTS ${_tagflow_cuda_library_hints})
  if(TAGFLOW_${_tagflow_upper}_INCLUDE_DIR AND TAGFLOW_${_tagflow_upper}_LIBRARY)
    add_library(tagflow::${_tagflow_name} SHARED IMPORTED)
    set_target_properties(tagflow::${_tagflow_name} PROPERTIES
      IMPORTED_LOCATION "${TAGFLOW_${_tagflow_upper}_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${TAGFLOW_${_tagflow_upper}_INCLUDE_DIR}")
  endif()
endforeach()
unset(_tagflow_spec)
unset(_tagflow_name)
unset(_tagflow_header)
unset(_tagflow_library)
unset(_tagflow_upper)
