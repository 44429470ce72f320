#pragma once
// tagflow's version, MAJOR.MINOR.PATCH. The shared library's SONAME carries
// the major version (libtagflow.so.0); the CMake package accepts a request
// for the same major and minor version. CMakeLists.txt reads the numbers
// from this file, so this is the one place they are written.
//
//   static_assert(TAGFLOW_VERSION >= TAGFLOW_VERSION_NUMBER(0, 1, 0));
//   std::cout << tagflow::version_string();   // the library's, at run time
//
// Threads: safe to call concurrently. The macros are constants, and
// version_string() returns one.

#define TAGFLOW_VERSION_MAJOR 0
#define TAGFLOW_VERSION_MINOR 1
#define TAGFLOW_VERSION_PATCH 0

/// One comparable number: major * 10000 + minor * 100 + patch.
#define TAGFLOW_VERSION_NUMBER(major, minor, patch) ((major)*10000 + (minor)*100 + (patch))
#define TAGFLOW_VERSION \
  TAGFLOW_VERSION_NUMBER(TAGFLOW_VERSION_MAJOR, TAGFLOW_VERSION_MINOR, TAGFLOW_VERSION_PATCH)

#define TAGFLOW_VERSION_STRINGIFY_(x) #x
#define TAGFLOW_VERSION_STRINGIFY(x) TAGFLOW_VERSION_STRINGIFY_(x)
/// "0.1.0": the version of the headers compiled against.
#define TAGFLOW_VERSION_STRING                                                        \
  TAGFLOW_VERSION_STRINGIFY(TAGFLOW_VERSION_MAJOR)                                    \
  "." TAGFLOW_VERSION_STRINGIFY(TAGFLOW_VERSION_MINOR) "." TAGFLOW_VERSION_STRINGIFY( \
      TAGFLOW_VERSION_PATCH)

namespace tagflow {

/// The version of the library linked at run time ("0.1.0"), which may be
/// newer than TAGFLOW_VERSION_STRING, the headers'.
const char* version_string();

}  // namespace tagflow
