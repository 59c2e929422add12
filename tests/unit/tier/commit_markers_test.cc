#include "tier/commit_markers.h"

#include "hots3/common/glob.h"

#include <gtest/gtest.h>

namespace hots3::tier {
namespace {

TEST(CommitMarkers, DoubleStarCrossesDirectoriesAndMayBeNone) {
  EXPECT_TRUE(glob_match("**/.metadata", "ckpt/step-100/.metadata"));
  EXPECT_TRUE(glob_match("**/.metadata", ".metadata"));
  EXPECT_TRUE(glob_match("**/.metadata", "a/b/c/d/.metadata"));
  EXPECT_FALSE(glob_match("**/.metadata", "ckpt/step-100/.metadata.tmp"));
  EXPECT_FALSE(glob_match("**/.metadata", "ckpt/step-100/x.metadata"));
  EXPECT_TRUE(glob_match("ckpt/**", "ckpt/a/b"));
  EXPECT_FALSE(glob_match("ckpt/**", "other/a"));
}

TEST(CommitMarkers, SingleStarAndQuestionMarkStayInOneDirectory) {
  EXPECT_TRUE(glob_match("runs/*/COMMIT", "runs/7/COMMIT"));
  EXPECT_FALSE(glob_match("runs/*/COMMIT", "runs/7/step-1/COMMIT"));
  EXPECT_TRUE(glob_match("*.done", "epoch-3.done"));
  EXPECT_FALSE(glob_match("*.done", "dir/epoch-3.done"));
  EXPECT_TRUE(glob_match("step-?/COMMIT", "step-5/COMMIT"));
  EXPECT_FALSE(glob_match("step-?/COMMIT", "step-15/COMMIT"));
  EXPECT_TRUE(glob_match("", ""));
  EXPECT_FALSE(glob_match("", "x"));
}

TEST(CommitMarkers, ManyWildcardsAgainstALongKeyCostLittle) {
  // A backtracking matcher takes about key^wildcards steps here; keys come from clients.
  const std::string key(1024, 'a');
  EXPECT_FALSE(glob_match("*a*a*a*a*a*a*a*a*b", key));
  EXPECT_FALSE(glob_match("**a**a**a**a**a**a**b", key));
  EXPECT_TRUE(glob_match("**a**a**a**a**a**a**", key));
  EXPECT_TRUE(glob_match("***", "a/b"));
  EXPECT_FALSE(glob_match("*", "a/b"));
  EXPECT_TRUE(glob_match("a/**/b", "a/b"));
  EXPECT_TRUE(glob_match("a/**/b", "a/x/y/b"));
  EXPECT_TRUE(glob_match("??", "a/"));
}

TEST(CommitMarkers, AKeyIsAMarkerIfAnyPatternMatches) {
  const std::vector<std::string> patterns{"**/.metadata", "**/COMMIT"};
  EXPECT_TRUE(glob_any(patterns, "run/COMMIT"));
  EXPECT_TRUE(glob_any(patterns, "run/.metadata"));
  EXPECT_FALSE(glob_any(patterns, "run/shard-0"));
  EXPECT_FALSE(glob_any({}, "run/COMMIT"));
}

TEST(CommitMarkers, AMarkerCommitsItsDirectory) {
  EXPECT_EQ(marker_prefix("ckpt/step-100/.metadata"), "ckpt/step-100/");
  EXPECT_EQ(marker_prefix(".metadata"), "");
  EXPECT_EQ(marker_prefix("a//.metadata"), "a//");
}

}  // namespace
}  // namespace hots3::tier
