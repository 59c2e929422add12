#include "hots3/aws/signer.h"

#include "hots3/common/text.h"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>

namespace hots3::aws {

std::string Signer::amz_date(std::int64_t time_ms) {
  const std::time_t seconds = static_cast<std::time_t>(time_ms / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  return fmt::format("{:04}{:02}{:02}T{:02}{:02}{:02}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

void Signer::sign(std::string_view method, std::string_view path,
                  const std::vector<QueryParameter>& query, HeaderList& headers,
                  std::string_view payload_hash, std::int64_t time_ms) {
  const std::string date_time = amz_date(time_ms);
  headers.emplace_back("x-amz-date", date_time);
  headers.emplace_back("x-amz-content-sha256", std::string(payload_hash));
  if (!credentials_.session_token.empty()) {
    headers.emplace_back(credentials_.s3express ? "x-amz-s3session-token" : "X-Amz-Security-Token",
                         credentials_.session_token);
  }

  const SigningScope scope{date_time.substr(0, 8), credentials_.region, service_};
  if (scope.date != key_date_) {
    key_ = signing_key(credentials_.secret_key, scope);
    key_date_ = scope.date;
  }
  std::vector<std::string> names;
  names.reserve(headers.size());
  for (const auto& [name, value] : headers) names.push_back(lower(name));
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  CanonicalInput input;
  input.method = method;
  input.path = path;
  input.query = &query;
  input.header_values = [&headers](std::string_view name, std::vector<std::string_view>& values) {
    for (const auto& [n, v] : headers) {
      if (iequals(n, name)) values.emplace_back(v);
    }
  };
  input.signed_headers = &names;
  input.payload_hash = payload_hash;
  const std::string to_sign = string_to_sign(date_time, scope, canonical_request(input));
  std::string signed_list;
  for (const auto& n : names) {
    if (!signed_list.empty()) signed_list += ';';
    signed_list += n;
  }
  headers.emplace_back("Authorization",
                       fmt::format("{} Credential={}/{}, SignedHeaders={}, Signature={}",
                                   kAlgorithm, credentials_.access_key, scope.to_string(),
                                   signed_list, aws::sign(key_, to_sign)));
}

std::string request_target(std::string_view path, const std::vector<QueryParameter>& query) {
  std::string target = uri_encode(path, false);
  char separator = '?';
  for (const auto& [name, value] : query) {
    target += separator;
    target += uri_encode(name, true);
    if (!value.empty()) target += "=" + uri_encode(value, true);
    separator = '&';
  }
  return target;
}

}  // namespace hots3::aws
