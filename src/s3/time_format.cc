#include "time_format.h"

#include <fmt/format.h>

#include <array>
#include <chrono>
#include <ctime>

namespace hots3::s3 {
namespace {

constexpr std::array<std::string_view, 7> kDays = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
constexpr std::array<std::string_view, 12> kMonths = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                      "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

std::tm utc(std::int64_t ms) {
  const std::time_t seconds = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  return tm;
}

// Digits only (no sign, no space): a date that parses in more than one spelling is a signed
// field a client could vary. Read digit by digit: every signed request parses its x-amz-date.
bool number(std::string_view text, int& out) {
  if (text.empty() || text.size() > 9) return false;
  int value = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + (c - '0');
  }
  out = value;
  return true;
}

int days_in_month(int year, int month) {  // month 0..11
  constexpr std::array<int, 12> kDaysInMonth = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  return month == 1 && leap ? 29 : kDaysInMonth[static_cast<std::size_t>(month)];
}

int month_of(std::string_view name) {
  for (std::size_t i = 0; i < kMonths.size(); ++i) {
    if (kMonths[i] == name) return static_cast<int>(i);
  }
  return -1;
}

std::optional<std::int64_t> to_ms(int year, int month, int day, int hour, int minute, int second) {
  if (month < 0 || month > 11 || day < 1 || day > days_in_month(year, month) || hour > 23 ||
      minute > 59 || second > 60 || year < 1970) {
    return std::nullopt;
  }
  // The calendar's arithmetic, not timegm (which takes the time zone lock on every call).
  using namespace std::chrono;
  const sys_days date{std::chrono::year{year} /
                      std::chrono::month{static_cast<unsigned>(month) + 1} /
                      std::chrono::day{static_cast<unsigned>(day)}};
  const auto at = date + hours{hour} + minutes{minute} + seconds{second};
  return static_cast<std::int64_t>(at.time_since_epoch().count()) * 1000;
}

}  // namespace

std::string http_date(std::int64_t ms) {
  // Every GET and HEAD sends one (Last-Modified): written digit by digit from the calendar date,
  // not through gmtime and a format string, which were a visible share of a small request.
  using namespace std::chrono;
  const sys_seconds at{seconds{ms >= 0 ? ms / 1000 : (ms - 999) / 1000}};
  const sys_days day = floor<days>(at);
  const year_month_day date{day};
  const hh_mm_ss<seconds> time{at - day};
  const auto two = [](char* out, unsigned v) {
    out[0] = static_cast<char>('0' + v / 10);
    out[1] = static_cast<char>('0' + v % 10);
  };
  std::string out = "Www, DD Mon YYYY HH:MM:SS GMT";
  const std::string_view name = kDays[weekday{day}.c_encoding()];
  std::copy(name.begin(), name.end(), out.begin());
  two(&out[5], static_cast<unsigned>(date.day()));
  const std::string_view month = kMonths[static_cast<unsigned>(date.month()) - 1];
  std::copy(month.begin(), month.end(), out.begin() + 8);
  const auto year = static_cast<unsigned>(static_cast<int>(date.year()) % 10000);
  two(&out[12], year / 100);
  two(&out[14], year % 100);
  two(&out[17], static_cast<unsigned>(time.hours().count()));
  two(&out[20], static_cast<unsigned>(time.minutes().count()));
  two(&out[23], static_cast<unsigned>(time.seconds().count()));
  return out;
}

std::string iso8601(std::int64_t ms) {
  const std::tm tm = utc(ms);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms % 1000);
}

std::optional<std::int64_t> parse_http_date(std::string_view t) {
  int day = 0, year = 0, hour = 0, minute = 0, second = 0;
  // RFC 1123: "Sun, 06 Nov 1994 08:49:37 GMT"
  if (t.size() == 29 && t[3] == ',' && t.substr(26) == "GMT") {
    if (!number(t.substr(5, 2), day) || !number(t.substr(12, 4), year) ||
        !number(t.substr(17, 2), hour) || !number(t.substr(20, 2), minute) ||
        !number(t.substr(23, 2), second)) {
      return std::nullopt;
    }
    return to_ms(year, month_of(t.substr(8, 3)), day, hour, minute, second);
  }
  // RFC 850: "Sunday, 06-Nov-94 08:49:37 GMT"
  if (const auto comma = t.find(", "); comma != std::string_view::npos && t.size() == comma + 24 &&
                                       t.substr(t.size() - 3) == "GMT") {
    const auto rest = t.substr(comma + 2);
    if (!number(rest.substr(0, 2), day) || !number(rest.substr(7, 2), year) ||
        !number(rest.substr(10, 2), hour) || !number(rest.substr(13, 2), minute) ||
        !number(rest.substr(16, 2), second)) {
      return std::nullopt;
    }
    return to_ms(year < 70 ? 2000 + year : 1900 + year, month_of(rest.substr(3, 3)), day, hour,
                 minute, second);
  }
  // asctime: "Sun Nov  6 08:49:37 1994"
  if (t.size() == 24 && t[3] == ' ') {
    std::string_view d = t.substr(8, 2);
    if (d.front() == ' ') d.remove_prefix(1);
    if (!number(d, day) || !number(t.substr(20, 4), year) || !number(t.substr(11, 2), hour) ||
        !number(t.substr(14, 2), minute) || !number(t.substr(17, 2), second)) {
      return std::nullopt;
    }
    return to_ms(year, month_of(t.substr(4, 3)), day, hour, minute, second);
  }
  return std::nullopt;
}

std::optional<std::int64_t> parse_amz_date(std::string_view t) {
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  if (t.size() != 16 || t[8] != 'T' || t[15] != 'Z') return std::nullopt;
  if (!number(t.substr(0, 4), year) || !number(t.substr(4, 2), month) ||
      !number(t.substr(6, 2), day) || !number(t.substr(9, 2), hour) ||
      !number(t.substr(11, 2), minute) || !number(t.substr(13, 2), second)) {
    return std::nullopt;
  }
  return to_ms(year, month - 1, day, hour, minute, second);
}

std::optional<std::int64_t> parse_iso8601(std::string_view t) {
  // "2026-11-22T02:16:54Z" or with ".123" (any number of fraction digits) before the Z.
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  if (t.size() < 20 || t[4] != '-' || t[7] != '-' || t[10] != 'T' || t[13] != ':' || t[16] != ':' ||
      t.back() != 'Z') {
    return std::nullopt;
  }
  if (!number(t.substr(0, 4), year) || !number(t.substr(5, 2), month) ||
      !number(t.substr(8, 2), day) || !number(t.substr(11, 2), hour) ||
      !number(t.substr(14, 2), minute) || !number(t.substr(17, 2), second)) {
    return std::nullopt;
  }
  int fraction_ms = 0;
  const std::string_view fraction = t.substr(19, t.size() - 20);
  if (!fraction.empty()) {
    if (fraction.size() < 2 || fraction[0] != '.' ||
        !number(fraction.substr(1, std::min<std::size_t>(3, fraction.size() - 1)), fraction_ms))
      return std::nullopt;
    for (std::size_t digits = fraction.size() - 1; digits < 3; ++digits) fraction_ms *= 10;
  }
  auto ms = to_ms(year, month - 1, day, hour, minute, second);
  if (!ms) return std::nullopt;
  return *ms + fraction_ms;
}

}  // namespace hots3::s3
