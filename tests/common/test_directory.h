#pragma once
// A scratch directory for the running test, for the tests that write files.

#include <unistd.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

namespace tagflow::testing {

/// "<temporary directory>/<prefix>_<pid>_<test name>", made empty: a
/// directory of the running test's own, which no other test or test
/// process shares. The caller removes it when done.
inline std::filesystem::path make_test_directory(const std::string& prefix) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      (prefix + "_" + std::to_string(::getpid()) + "_" + info->name());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace tagflow::testing
