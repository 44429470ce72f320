// Tests of engine/operation.h beyond what the engine tests cover: the
// bounded table of intern_name().

#include "engine/operation.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

namespace tagflow {
namespace {

TEST(InternNameTest, SameTextSamePointerAndItOutlivesTheArgument) {
  const char* a = nullptr;
  {
    std::string text = "interned " + std::to_string(42);
    a = intern_name(text);
    text.assign("something else");
  }
  EXPECT_STREQ(a, "interned 42");
  EXPECT_EQ(intern_name("interned 42"), a);
  EXPECT_NE(intern_name("interned 43"), a);
}

TEST(InternNameTest, LongNamesAreCut) {
  const std::string long_name(kMaxInternedNameLength + 100, 'x');
  const char* kept = intern_name(long_name);
  EXPECT_EQ(std::strlen(kept), kMaxInternedNameLength);
  EXPECT_EQ(intern_name(long_name.substr(0, kMaxInternedNameLength)), kept);
}

TEST(InternNameTest, TheTableIsBounded) {
  // In a process of its own: the table is process-wide and this fills it.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        const char* first = intern_name("name 0");
        for (std::size_t i = 1; i < 2 * kMaxInternedNames; ++i) {
          static_cast<void>(intern_name("name " + std::to_string(i)));
        }
        const bool kept_old = intern_name("name 0") == first;
        const bool placeholder =
            std::strcmp(intern_name("a new name"), "(too many operation names)") == 0;
        std::fprintf(stderr, "kept_old=%d placeholder=%d\n", kept_old, placeholder);
        std::exit(kept_old && placeholder ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace tagflow
