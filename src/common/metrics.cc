// Counters, histograms and the Prometheus text format.

#include "hots3/common/metrics.h"

#include "hots3/common/thread_index.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace hots3::metrics {
namespace {

constexpr auto kRelaxed = std::memory_order_relaxed;

std::size_t slot() noexcept { return thread_index() % kSlots; }

void append_value(std::string& out, double value) {
  if (std::isinf(value)) {
    out += value > 0 ? "+Inf" : "-Inf";
  } else if (std::isnan(value)) {
    out += "NaN";
  } else if (value == std::floor(value) && std::fabs(value) < 1e15) {
    fmt::format_to(std::back_inserter(out), "{}", static_cast<std::int64_t>(value));
  } else {
    fmt::format_to(std::back_inserter(out), "{}", value);
  }
}

}  // namespace

void Counter::add(std::uint64_t n) noexcept { slots_[slot()].value.fetch_add(n, kRelaxed); }

std::uint64_t Counter::value() const noexcept {
  std::uint64_t sum = 0;
  for (const Slot& s : slots_) sum += s.value.load(kRelaxed);
  return sum;
}

void Histogram::observe_us(std::uint64_t micros) noexcept {
  const double seconds = static_cast<double>(micros) / 1e6;
  buckets_.add(static_cast<std::size_t>(std::lower_bound(kBounds.begin(), kBounds.end(), seconds) -
                                        kBounds.begin()),
               micros);
}

Histogram::Snapshot Histogram::snapshot() const noexcept {
  const auto totals = buckets_.totals();
  return {totals.cumulative, static_cast<double>(totals.sum) / 1e6};
}

void SizeHistogram::observe(std::uint64_t n) noexcept {
  buckets_.add(static_cast<std::size_t>(
                   std::lower_bound(kBounds.begin(), kBounds.end(), static_cast<double>(n)) -
                   kBounds.begin()),
               n);
}

SizeHistogram::Snapshot SizeHistogram::snapshot() const noexcept {
  const auto totals = buckets_.totals();
  return {totals.cumulative, static_cast<double>(totals.sum)};
}

void Writer::family(std::string_view name, std::string_view type, std::string_view help) {
  fmt::format_to(std::back_inserter(out_), "# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

void Writer::write_labels(Labels labels, std::string_view extra_name,
                          std::string_view extra_value) {
  if (labels.size() == 0 && extra_name.empty()) return;
  out_ += '{';
  bool first = true;
  auto one = [&](std::string_view name, std::string_view value) {
    if (!first) out_ += ',';
    first = false;
    out_ += name;
    out_ += "=\"";
    for (char c : value) {
      if (c == '\\' || c == '"') {
        out_ += '\\';
        out_ += c;
      } else if (c == '\n') {
        out_ += "\\n";
      } else {
        out_ += c;
      }
    }
    out_ += '"';
  };
  for (const auto& [name, value] : labels) one(name, value);
  if (!extra_name.empty()) one(extra_name, extra_value);
  out_ += '}';
}

void Writer::sample(std::string_view name, Labels labels, double value) {
  out_ += name;
  write_labels(labels);
  out_ += ' ';
  append_value(out_, value);
  out_ += '\n';
}

void Writer::histogram(std::string_view name, Labels labels, const Histogram::Snapshot& h) {
  write_histogram(name, labels, Histogram::kBounds, h.cumulative, h.sum_seconds);
}

void Writer::histogram(std::string_view name, Labels labels, const SizeHistogram::Snapshot& h) {
  write_histogram(name, labels, SizeHistogram::kBounds, h.cumulative, h.sum);
}

void Writer::write_histogram(std::string_view name, Labels labels, std::span<const double> bounds,
                             std::span<const std::uint64_t> cumulative, double sum) {
  const std::string bucket = std::string(name) + "_bucket";
  std::string bound;
  for (std::size_t i = 0; i < cumulative.size(); ++i) {
    bound.clear();
    if (i < bounds.size()) {
      append_value(bound, bounds[i]);
    } else {
      bound = "+Inf";
    }
    out_ += bucket;
    write_labels(labels, "le", bound);
    out_ += ' ';
    append_value(out_, static_cast<double>(cumulative[i]));
    out_ += '\n';
  }
  sample(std::string(name) + "_sum", labels, sum);
  sample(std::string(name) + "_count", labels, static_cast<double>(cumulative.back()));
}

void Writer::counter(std::string_view name, std::string_view help, double value) {
  family(name, "counter", help);
  sample(name, value);
}

void Writer::gauge(std::string_view name, std::string_view help, double value) {
  family(name, "gauge", help);
  sample(name, value);
}

std::string Registry::scrape() const {
  Writer w;
  for (const Collector& c : collectors_) c(w);
  return w.take();
}

}  // namespace hots3::metrics
