# The Python module (python/): pybind11 from Debian's pybind11-dev, against
# the system's Python 3 (for which Debian's python3-numpy is installed)
# unless -DPython_EXECUTABLE names another. Sets TAGFLOW_HAVE_PYTHON.
#
# A Python extension is loaded into an interpreter that is not built with a
# sanitizer's runtime, so sanitizer and fuzzing builds leave it out (AUTO).

set(TAGFLOW_HAVE_PYTHON OFF)
if(TAGFLOW_PYTHON STREQUAL "AUTO" AND TAGFLOW_SANITIZE)
  message(STATUS "tagflow: Python module OFF (a sanitizer build: TAGFLOW_SANITIZE=${TAGFLOW_SANITIZE})")
  return()
endif()
if(TAGFLOW_PYTHON STREQUAL "OFF")
  message(STATUS "tagflow: Python module OFF")
  return()
endif()

if(NOT DEFINED Python_EXECUTABLE AND EXISTS /usr/bin/python3)
  set(Python_EXECUTABLE /usr/bin/python3)
endif()
set(PYBIND11_FINDPYTHON ON)
find_package(Python 3.9 COMPONENTS Interpreter Development.Module QUIET)
if(Python_FOUND)
  find_package(pybind11 2.10 CONFIG QUIET)
endif()
# DLPack's header (Debian's libdlpack-dev): arrays to and from other libraries.
find_path(TAGFLOW_DLPACK_INCLUDE_DIR dlpack/dlpack.h)
if(Python_FOUND AND pybind11_FOUND AND TAGFLOW_DLPACK_INCLUDE_DIR)
  set(TAGFLOW_HAVE_PYTHON ON)
  message(STATUS "tagflow: Python module ON (Python ${Python_VERSION} at ${Python_EXECUTABLE}, "
                 "pybind11 ${pybind11_VERSION})")
elseif(TAGFLOW_PYTHON STREQUAL "ON")
  message(FATAL_ERROR "tagflow: TAGFLOW_PYTHON=ON needs Python's headers, pybind11 and DLPack's "
                      "header; install python3-dev, pybind11-dev and libdlpack-dev "
                      "(scripts/setup.sh) or configure with -DTAGFLOW_PYTHON=OFF")
else()
  message(STATUS "tagflow: Python module OFF (Python's headers, pybind11 or dlpack.h not found)")
endif()
