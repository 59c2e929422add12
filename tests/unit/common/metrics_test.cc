#include "hots3/common/metrics.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace hots3::metrics {
namespace {

TEST(Metrics, CountersSumWhatEveryThreadAdded) {
  Counter c;
  std::vector<std::thread> threads;
  for (int t = 0; t < 12; ++t) {  // more threads than slots: some share one
    threads.emplace_back([&c] {
      for (int i = 0; i < 10000; ++i) c.add();
    });
  }
  for (auto& t : threads) t.join();
  c.add(5);
  EXPECT_EQ(c.value(), 120005U);
}

TEST(Metrics, HistogramsCountEachDurationInTheFirstBucketThatHoldsIt) {
  Histogram h;
  h.observe_us(50);          // 0.00005 s: the first bucket (0.0001)
  h.observe_us(100);         // on a bound: that bucket (le is "less or equal")
  h.observe_us(3'000);       // 0.003 s: the 0.005 bucket
  h.observe_us(90'000'000);  // 90 s: +Inf only
  const Histogram::Snapshot s = h.snapshot();
  EXPECT_EQ(s.cumulative[0], 2U);
  EXPECT_EQ(s.cumulative[4], 2U);  // 0.0025
  EXPECT_EQ(s.cumulative[5], 3U);  // 0.005
  EXPECT_EQ(s.cumulative[Histogram::kBounds.size() - 1], 3U);
  EXPECT_EQ(s.cumulative.back(), 4U);
  EXPECT_DOUBLE_EQ(s.sum_seconds, 90.00315);
}

TEST(Metrics, SizeHistogramsCountInPowerOfTwoBucketsAndWriteTheirBounds) {
  SizeHistogram h;
  h.observe(1);
  h.observe(3);     // the 4 bucket
  h.observe(512);   // on the last bound
  h.observe(1000);  // +Inf only
  const SizeHistogram::Snapshot s = h.snapshot();
  EXPECT_EQ(s.cumulative[0], 1U);  // le 1
  EXPECT_EQ(s.cumulative[1], 1U);  // le 2
  EXPECT_EQ(s.cumulative[2], 2U);  // le 4
  EXPECT_EQ(s.cumulative[SizeHistogram::kBounds.size() - 1], 3U);
  EXPECT_EQ(s.cumulative.back(), 4U);
  EXPECT_DOUBLE_EQ(s.sum, 1516);
  Writer w;
  w.histogram("b", {}, s);
  const std::string text = w.take();
  EXPECT_NE(text.find("b_bucket{le=\"4\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("b_bucket{le=\"+Inf\"} 4\nb_sum 1516\nb_count 4\n"), std::string::npos)
      << text;
}

TEST(Metrics, TheTextFormatHasFamiliesSamplesAndEscapedLabels) {
  Writer w;
  w.counter("x_total", "X things", 3);
  w.family("y", "gauge", "Y");
  w.sample("y", {{"name", "a\"b\\c\nd"}, {"kind", "k"}}, 0.5);
  Histogram h;
  h.observe_us(200);
  w.family("d_seconds", "histogram", "D");
  w.histogram("d_seconds", {{"op", "Get"}}, h.snapshot());
  const std::string text = w.take();
  EXPECT_NE(text.find("# HELP x_total X things\n# TYPE x_total counter\nx_total 3\n"),
            std::string::npos);
  EXPECT_NE(text.find("y{name=\"a\\\"b\\\\c\\nd\",kind=\"k\"} 0.5\n"), std::string::npos) << text;
  EXPECT_NE(text.find("d_seconds_bucket{op=\"Get\",le=\"0.0001\"} 0\n"), std::string::npos);
  EXPECT_NE(text.find("d_seconds_bucket{op=\"Get\",le=\"0.00025\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("d_seconds_bucket{op=\"Get\",le=\"+Inf\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("d_seconds_sum{op=\"Get\"} 0.0002\n"), std::string::npos) << text;
  EXPECT_NE(text.find("d_seconds_count{op=\"Get\"} 1\n"), std::string::npos);
}

TEST(Metrics, ARegistryRunsItsCollectorsInOrder) {
  Registry r;
  r.add([](Writer& w) { w.gauge("a", "A", 1); });
  r.add([](Writer& w) { w.gauge("b", "B", 2); });
  const std::string text = r.scrape();
  EXPECT_LT(text.find("a 1\n"), text.find("b 2\n"));
  EXPECT_EQ(r.scrape(), text);
}

}  // namespace
}  // namespace hots3::metrics
