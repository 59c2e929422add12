#include "wire.h"

#include "hots3/common/hex.h"
#include "hots3/common/logging.h"
#include "hots3/common/text.h"

#include <fmt/format.h>

#include <array>

namespace hots3::http::detail {

std::string_view reason_phrase(unsigned status) noexcept {
  struct Reason {
    unsigned status;
    std::string_view phrase;
  };
  static constexpr Reason kReasons[] = {
      {100, "Continue"},
      {200, "OK"},
      {201, "Created"},
      {202, "Accepted"},
      {204, "No Content"},
      {206, "Partial Content"},
      {301, "Moved Permanently"},
      {302, "Found"},
      {304, "Not Modified"},
      {307, "Temporary Redirect"},
      {400, "Bad Request"},
      {401, "Unauthorized"},
      {403, "Forbidden"},
      {404, "Not Found"},
      {405, "Method Not Allowed"},
      {408, "Request Timeout"},
      {409, "Conflict"},
      {411, "Length Required"},
      {412, "Precondition Failed"},
      {413, "Payload Too Large"},
      {414, "URI Too Long"},
      {416, "Range Not Satisfiable"},
      {417, "Expectation Failed"},
      {422, "Unprocessable Content"},
      {429, "Too Many Requests"},
      {431, "Request Header Fields Too Large"},
      {500, "Internal Server Error"},
      {501, "Not Implemented"},
      {502, "Bad Gateway"},
      {503, "Service Unavailable"},
      {504, "Gateway Timeout"},
      {505, "HTTP Version Not Supported"},
      {507, "Insufficient Storage"},
  };
  for (const Reason& r : kReasons) {
    if (r.status == status) return r.phrase;
  }
  return "Unknown";
}

void append_status_line(std::string& out, unsigned status) {
  // Once per response: appended, not formatted.
  const char code[3] = {static_cast<char>('0' + status / 100 % 10),
                        static_cast<char>('0' + status / 10 % 10),
                        static_cast<char>('0' + status % 10)};
  out.append("HTTP/1.1 ").append(code, sizeof code).append(" ").append(reason_phrase(status));
  out.append("\r\n");
}

namespace {

// Appended whole: a CR, LF or NUL (which would end the line, or the head, early) becomes a space.
// (A character at a time, the append was a visible share of a small response's CPU; the look
// for those characters reads a word at a time, and the mending is only done when needed.)
void append_clean(std::string& out, std::string_view text) {
  const std::size_t from = out.size();
  out.append(text);
  if (!has_byte_below(text, 14)) return;  // (CR, LF and NUL are below 14)
  for (std::size_t i = from; i < out.size(); ++i) {
    const auto c = static_cast<unsigned char>(out[i]);
    if (c == '\r' || c == '\n' || c == '\0') out[i] = ' ';
  }
}

}  // namespace

void append_header(std::string& out, std::string_view name, std::string_view value) {
  append_clean(out, name);
  out += ": ";
  append_clean(out, value);
  out += "\r\n";
}

void append_response_headers(std::string& out, const Response& response,
                             std::string_view request_id) {
  out += response.fixed_lines;
  if (!response.request_id_header.empty())
    append_header(out, response.request_id_header, request_id);
  out += response.lines;
}

std::size_t format_chunk_line(std::size_t size_bytes, char* out) noexcept {
  auto* end = fmt::format_to(out, "{:x}\r\n", size_bytes);
  return static_cast<std::size_t>(end - out);
}

void format_request_id(std::uint64_t seed, std::uint64_t counter, char (&out)[16]) noexcept {
  // splitmix64 of seed + counter: distinct for distinct counters (a bijection), not guessable
  // across restarts.
  std::uint64_t z = seed + counter * 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (int i = 15; i >= 0; --i) {
    out[i] = kHex[z & 0xF];
    z >>= 4;
  }
}

namespace {

// Whether a query parameter carries a secret: a signature (X-Amz-Signature, SigV2's Signature)
// or a session token. Judged on the decoded name, as the server reads it, so that an encoded
// spelling ("X-Amz-Sig%6Eature") cannot slip a signature past the redaction.
bool is_secret_parameter(std::string_view raw_name) {
  std::string name;
  name.reserve(raw_name.size());
  for (std::size_t i = 0; i < raw_name.size(); ++i) {
    const char c = raw_name[i];
    if (c == '%' && i + 2 < raw_name.size()) {
      const int high = hex_value(raw_name[i + 1]);
      const int low = hex_value(raw_name[i + 2]);
      if (high >= 0 && low >= 0) {
        name += static_cast<char>(high * 16 + low);
        i += 2;
        continue;
      }
    }
    name += c;
  }
  name = lower(name);
  return name.find("signature") != std::string::npos || name == "x-amz-security-token";
}

}  // namespace

void append_redacted_target(std::string& out, std::string_view target) {
  const auto question = target.find('?');
  if (question == std::string_view::npos) {
    log::append_json_escaped(out, target);
    return;
  }
  log::append_json_escaped(out, target.substr(0, question + 1));
  std::string_view query = target.substr(question + 1);
  bool first = true;
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view param = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    if (!first) out += '&';
    first = false;
    const auto eq = param.find('=');
    const std::string_view name = param.substr(0, eq);
    if (eq != std::string_view::npos && is_secret_parameter(name)) {
      log::append_json_escaped(out, name);
      out += "=REDACTED";
    } else {
      log::append_json_escaped(out, param);
    }
  }
}

std::string format_access_line(const RequestHead& head, unsigned status, std::uint64_t in_bytes,
                               std::uint64_t out_bytes, std::int64_t duration_us,
                               std::string_view second, unsigned millis) {
  std::string line;
  line.reserve(256 + head.target.size());
  line += R"({"time":")";
  line.append(second);
  const std::array<char, 4> ms = {'.', static_cast<char>('0' + millis / 100 % 10),
                                  static_cast<char>('0' + millis / 10 % 10),
                                  static_cast<char>('0' + millis % 10)};
  line.append(ms.data(), ms.size());
  line += R"(Z","id":")";
  line.append(head.request_id);
  line += R"(","remote":")";
  log::append_json_escaped(line, head.remote_address);
  line += R"(","method":")";
  log::append_json_escaped(line, head.method_string);
  line += R"(","target":")";
  append_redacted_target(line, head.target);
  fmt::format_to(std::back_inserter(line),
                 R"(","status":{},"bytes_in":{},"bytes_out":{},"duration_ms":{:.3f}}})", status,
                 in_bytes, out_bytes, static_cast<double>(duration_us) / 1000.0);
  return line;
}

}  // namespace hots3::http::detail
