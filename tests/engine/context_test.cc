#include "engine/context.h"

#include <sstream>
#include <unordered_set>

#include <gtest/gtest.h>

#include "engine/error.h"

namespace tagflow {
namespace {

TEST(Context, PrintsLikeTheTutorials) {
  EXPECT_EQ(cpu().str(), "cpu(0)");
  EXPECT_EQ(gpu(1).str(), "gpu(1)");
  EXPECT_EQ(cpu_pinned(0).str(), "cpu_pinned(0)");
  std::ostringstream os;
  os << gpu(3);
  EXPECT_EQ(os.str(), "gpu(3)");
}

TEST(Context, ParsesEveryAcceptedSpelling) {
  EXPECT_EQ(Context::parse("gpu:1"), gpu(1));
  EXPECT_EQ(Context::parse("gpu(2)"), gpu(2));
  EXPECT_EQ(Context::parse("gpu"), gpu(0));
  EXPECT_EQ(Context::parse("cpu:0"), cpu(0));
  EXPECT_EQ(Context::parse("cpu(7)"), cpu(7));
  EXPECT_EQ(Context::parse("cpu_pinned:0"), cpu_pinned(0));
  EXPECT_EQ(Context::parse("cpu_pinned"), cpu_pinned(0));
}

TEST(Context, PrintThenParseIsIdentity) {
  for (Context c : {cpu(0), cpu(12), gpu(0), gpu(5), cpu_pinned(1)}) {
    EXPECT_EQ(Context::parse(c.str()), c) << c.str();
  }
}

TEST(Context, RejectsMalformedTextWithTheInputInTheMessage) {
  for (const char* bad :
       {"", "tpu:0", "gpu:", "gpu:-1", "gpu:1x", "gpu(1", "cpu 0", "gpu:99999999999"}) {
    try {
      (void)Context::parse(bad);
      FAIL() << "accepted \"" << bad << "\"";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("\"") + bad + "\""), std::string::npos)
          << e.what();
    }
  }
}

TEST(Context, IsAValueTypeThatHashes) {
  std::unordered_set<Context> set{cpu(0), cpu(1), gpu(0), gpu(0), cpu_pinned(0)};
  EXPECT_EQ(set.size(), 4u);
  EXPECT_TRUE(set.contains(gpu(0)));
  EXPECT_FALSE(set.contains(gpu(1)));
  EXPECT_NE(std::hash<Context>{}(cpu(1)), std::hash<Context>{}(gpu(1)));
  EXPECT_LT(cpu(0), cpu(1));
  EXPECT_TRUE(gpu(0).is_gpu());
  EXPECT_FALSE(gpu(0).is_host());
  EXPECT_TRUE(cpu_pinned(0).is_host());
}

}  // namespace
}  // namespace tagflow
