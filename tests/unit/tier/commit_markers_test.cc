#include "tier/commit_markers.h"

#include <gtest/gtest.h>

namespace hots3::tier {
namespace {

TEST(CommitMarkers, DoubleStarCrossesDirectoriesAndMayBeNone) {
  EXPECT_TRUE(marker_match("**/.metadata", "ckpt/step-100/.metadata"));
  EXPECT_TRUE(marker_match("**/.metadata", ".metadata"));
  EXPECT_TRUE(marker_match("**/.metadata", "a/b/c/d/.metadata"));
  EXPECT_FALSE(marker_match("**/.metadata", "ckpt/step-100/.metadata.tmp"));
  EXPECT_FALSE(marker_match("**/.metadata", "ckpt/step-100/x.metadata"));
  EXPECT_TRUE(marker_match("ckpt/**", "ckpt/a/b"));
  EXPECT_FALSE(marker_match("ckpt/**", "other/a"));
}

TEST(CommitMarkers, SingleStarAndQuestionMarkStayInOneDirectory) {
  EXPECT_TRUE(marker_match("runs/*/COMMIT", "runs/7/COMMIT"));
  EXPECT_FALSE(marker_match("runs/*/COMMIT", "runs/7/step-1/COMMIT"));
  EXPECT_TRUE(marker_match("*.done", "epoch-3.done"));
  EXPECT_FALSE(marker_match("*.done", "dir/epoch-3.done"));
  EXPECT_TRUE(marker_match("step-?/COMMIT", "step-5/COMMIT"));
  EXPECT_FALSE(marker_match("step-?/COMMIT", "step-15/COMMIT"));
  EXPECT_TRUE(marker_match("", ""));
  EXPECT_FALSE(marker_match("", "x"));
}

TEST(CommitMarkers, AKeyIsAMarkerIfAnyPatternMatches) {
  const std::vector<std::string> patterns{"**/.metadata", "**/COMMIT"};
  EXPECT_TRUE(is_commit_marker(patterns, "run/COMMIT"));
  EXPECT_TRUE(is_commit_marker(patterns, "run/.metadata"));
  EXPECT_FALSE(is_commit_marker(patterns, "run/shard-0"));
  EXPECT_FALSE(is_commit_marker({}, "run/COMMIT"));
}

TEST(CommitMarkers, AMarkerCommitsItsDirectory) {
  EXPECT_EQ(marker_prefix("ckpt/step-100/.metadata"), "ckpt/step-100/");
  EXPECT_EQ(marker_prefix(".metadata"), "");
  EXPECT_EQ(marker_prefix("a//.metadata"), "a//");
}

}  // namespace
}  // namespace hots3::tier
