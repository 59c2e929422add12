#pragma once

// Prometheus metrics: counters and latency histograms cheap enough for the request path, a
// registry of the collectors that report them, and the text exposition format they are scraped
// in (version 0.0.4).
//
// Counters and histograms count into slots, one cache line each, picked by the calling thread
// (thread_index.h): an increment is one relaxed atomic add on a line no other worker writes. A
// scrape sums the slots. Collectors are added before serving and run on every scrape; they read
// what their module already keeps (store statistics, connection counts) rather than count twice.
// Thread-safety: counting, observing and scraping from any thread; Registry::add before scrapes.

#include "hots3/common/thread_index.h"

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hots3::metrics {

inline constexpr std::size_t kSlots = 8;

class Counter {
 public:
  void add(std::uint64_t n = 1) noexcept;
  [[nodiscard]] std::uint64_t value() const noexcept;

 private:
  struct alignas(64) Slot {
    std::atomic<std::uint64_t> value{0};
  };
  std::array<Slot, kSlots> slots_{};
};

namespace detail {

// Observations counted by bucket (the first bound not below them; bucket N: above every bound)
// with their sum, in slots by thread; a snapshot's buckets are cumulative, as Prometheus has them.
template <std::size_t N>
class Buckets {
 public:
  struct Totals {
    std::array<std::uint64_t, N + 1> cumulative{};  // the last one is +Inf: all
    std::uint64_t sum = 0;
  };
  void add(std::size_t bucket, std::uint64_t value) noexcept {
    Slot& s = slots_[thread_index() % kSlots];
    s.buckets[bucket].fetch_add(1, std::memory_order_relaxed);
    s.sum.fetch_add(value, std::memory_order_relaxed);
  }
  [[nodiscard]] Totals totals() const noexcept {
    Totals out;
    for (const Slot& s : slots_) {
      for (std::size_t i = 0; i <= N; ++i)
        out.cumulative[i] += s.buckets[i].load(std::memory_order_relaxed);
      out.sum += s.sum.load(std::memory_order_relaxed);
    }
    for (std::size_t i = 1; i <= N; ++i) out.cumulative[i] += out.cumulative[i - 1];
    return out;
  }

 private:
  struct alignas(64) Slot {
    std::array<std::atomic<std::uint64_t>, N + 1> buckets{};
    std::atomic<std::uint64_t> sum{0};
  };
  std::array<Slot, kSlots> slots_{};
};

}  // namespace detail

// Durations, in Prometheus's seconds, into fixed buckets from 100 µs to 60 s.
class Histogram {
 public:
  static constexpr std::array<double, 15> kBounds = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5, 60};
  void observe_us(std::uint64_t micros) noexcept;

  struct Snapshot {
    std::array<std::uint64_t, kBounds.size() + 1> cumulative{};  // the last one is +Inf: all
    double sum_seconds = 0;
  };
  [[nodiscard]] Snapshot snapshot() const noexcept;

 private:
  detail::Buckets<kBounds.size()> buckets_;
};

// Counts of things (writes per batch), into power-of-two buckets from 1 to 512.
class SizeHistogram {
 public:
  static constexpr std::array<double, 10> kBounds = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512};
  void observe(std::uint64_t n) noexcept;

  struct Snapshot {
    std::array<std::uint64_t, kBounds.size() + 1> cumulative{};  // the last one is +Inf: all
    double sum = 0;
  };
  [[nodiscard]] Snapshot snapshot() const noexcept;

 private:
  detail::Buckets<kBounds.size()> buckets_;
};

using Labels = std::initializer_list<std::pair<std::string_view, std::string_view>>;

// The text exposition format. Every sample of a family follows its family() line, as the format
// requires; label values are escaped.
class Writer {
 public:
  // "# HELP" and "# TYPE" of the family `name`; `type` is counter, gauge or histogram.
  void family(std::string_view name, std::string_view type, std::string_view help);
  // One sample: `name` is the family's, or the family's with a suffix (_bucket, _sum, _count).
  void sample(std::string_view name, Labels labels, double value);
  void sample(std::string_view name, double value) { sample(name, {}, value); }
  // A histogram family's samples (_bucket for each bound and +Inf, _sum, _count).
  void histogram(std::string_view name, Labels labels, const Histogram::Snapshot& h);
  void histogram(std::string_view name, Labels labels, const SizeHistogram::Snapshot& h);
  // family() and one unlabelled sample.
  void counter(std::string_view name, std::string_view help, double value);
  void gauge(std::string_view name, std::string_view help, double value);

  [[nodiscard]] std::string take() { return std::move(out_); }

 private:
  void write_labels(Labels labels, std::string_view extra_name = {},
                    std::string_view extra_value = {});
  void write_histogram(std::string_view name, Labels labels, std::span<const double> bounds,
                       std::span<const std::uint64_t> cumulative, double sum);
  std::string out_;
};

class Registry {
 public:
  using Collector = std::function<void(Writer&)>;
  // REQUIRES: before the first scrape.
  void add(Collector collector) { collectors_.push_back(std::move(collector)); }
  // Every collector's families, in the order added.
  [[nodiscard]] std::string scrape() const;

 private:
  std::vector<Collector> collectors_;
};

inline constexpr std::string_view kContentType = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace hots3::metrics
