#include "storage/pins.h"

#include <gtest/gtest.h>

namespace hots3::storage::detail {
namespace {

TEST(Pins, KeysPrefixesAndGlobsPinPerBucket) {
  Pins pins;
  pins.add(1, {"ckpt/latest", true});
  pins.add(1, {"data/", false});
  pins.set_globs(1, {"**/keep/*"});
  EXPECT_TRUE(pins.pinned(1, "ckpt/latest"));
  EXPECT_FALSE(pins.pinned(1, "ckpt/latest2"));  // a key rule is that key only
  EXPECT_TRUE(pins.pinned(1, "data/x/y"));
  EXPECT_FALSE(pins.pinned(1, "data"));
  EXPECT_TRUE(pins.pinned(1, "a/b/keep/c"));
  EXPECT_FALSE(pins.pinned(1, "a/b/keep/c/d"));
  EXPECT_FALSE(pins.pinned(2, "data/x"));  // another bucket
}

TEST(Pins, APrefixRuleHoldsTheRulesUnderIt) {
  Pins pins;
  pins.add(1, {"a/b/", false});
  pins.add(1, {"a/b/c", true});
  pins.add(1, {"a/c", true});
  pins.add(1, {"a/", false});  // takes the three
  EXPECT_EQ(pins.rule_count(1), 1U);
  pins.add(1, {"a/b/", false});  // covered: nothing new
  EXPECT_EQ(pins.rule_count(1), 1U);
  EXPECT_TRUE(pins.covered(1, {"a/b/", false}));
  EXPECT_TRUE(pins.covered(1, {"a/zz", true}));
  EXPECT_FALSE(pins.covered(1, {"b", true}));
  // Between "a/" and a key under it sort only keys under it too: one prefix is checked.
  pins.add(1, {"a0", false});
  pins.add(1, {"a/a", true});
  EXPECT_TRUE(pins.pinned(1, "a/zzz"));
  EXPECT_TRUE(pins.pinned(1, "a0/x"));
  EXPECT_FALSE(pins.pinned(1, "a1"));
}

TEST(Pins, SpansHoldEveryPinOnceInKeyOrder) {
  Pins pins;
  pins.add(1, {"b/k", true});
  pins.add(1, {"c/", false});
  pins.set_globs(1, {"c/d/*", "e/**/f", "g?h"});
  const std::vector<KeySpan> spans = pins.spans(1);
  ASSERT_EQ(spans.size(), 4U);
  EXPECT_EQ(spans[0].text, "b/k");
  EXPECT_TRUE(spans[0].exact);
  EXPECT_EQ(spans[1].text, "c/");  // "c/d/" lies under it
  EXPECT_FALSE(spans[1].exact);
  EXPECT_EQ(spans[2].text, "e/");
  EXPECT_EQ(spans[3].text, "g");
  pins.set_globs(1, {"**"});
  ASSERT_EQ(pins.spans(1).size(), 1U);  // the whole bucket
  EXPECT_EQ(pins.spans(1)[0].text, "");
  EXPECT_TRUE(pins.spans(2).empty());
}

TEST(Pins, CommittedChangesApplyAsTheCatalogDoesThem) {
  Pins pins;
  pins.add(1, {"new", true});
  pins.add(1, {"old", true});
  pins.remove(1, {"old", true});
  EXPECT_TRUE(pins.pinned(1, "new"));
  EXPECT_FALSE(pins.pinned(1, "old"));
  pins.remove(1, {"", false});  // every rule under the empty prefix
  EXPECT_FALSE(pins.pinned(1, "new"));
  pins.set_globs(1, {"g/*"});
  pins.forget_bucket(1);
  EXPECT_FALSE(pins.pinned(1, "g/x"));
}

TEST(Pins, APendingRulePinsUntilItsTransactionEnds) {
  Pins pins;
  pins.add_pending(1, {"p/", false});
  pins.add(1, {"other", true});  // a transaction committed before the pin's
  EXPECT_TRUE(pins.pinned(1, "p/x"));
  EXPECT_TRUE(pins.pinned(1, "other"));
  pins.drop_pending(1, {"p/", false});  // its transaction failed: the catalog has no such rule
  EXPECT_FALSE(pins.pinned(1, "p/x"));
  pins.add_pending(1, {"q/", false});
  pins.add(1, {"q/", false});  // its own commit
  pins.drop_pending(1, {"q/", false});
  EXPECT_TRUE(pins.pinned(1, "q/x"));
  // Rules given nested (a catalog of an older build) still answer for every key.
  pins.add(1, {"a/b/", false});
  pins.add(1, {"a/", false});
  pins.add(1, {"a/c", true});
  EXPECT_TRUE(pins.pinned(1, "a/zz"));
  EXPECT_EQ(pins.rule_count(1), 3U);  // other, q/, a/
}

}  // namespace
}  // namespace hots3::storage::detail
