#include "tier_commands.h"

#include "hots3/common/errc.h"
#include "hots3/common/logging.h"
#include "hots3/common/text.h"
#include "hots3/common/units.h"
#include "hots3/config/config.h"
#include "hots3/http/client.h"
#include "hots3/s3client/s3_client.h"
#include "hots3/xml/xml.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <stdexcept>
#include <thread>
#include <unistd.h>
#include <vector>

namespace hots3::app {
namespace {

namespace asio = boost::asio;

http::ClientOptions client_options(const TierCommandOptions& o) {
  http::ClientOptions options;
  options.endpoint = o.endpoint;
  options.ca_file = o.ca_file;
  options.verify_tls = !o.insecure;
  // A flush answers within the server's longest wait for the upstream (under a minute).
  options.first_byte_timeout = std::chrono::seconds(90);
  return options;
}

// Runs `op` to its end on an io_context of this thread.
template <class T>
T run(asio::io_context& io, asio::awaitable<T> op) {
  auto done = asio::co_spawn(io, std::move(op), asio::use_future);
  io.run();
  return done.get();
}

std::string env(const char* name) {
  const char* value = std::getenv(name);  // NOLINT(concurrency-mt-unsafe): one thread
  return value != nullptr ? value : "";
}

// The signing credentials: from the environment as the AWS CLI has them (AWS_ACCESS_KEY_ID ...)
// or as the server takes its admin's (HOTS3_ACCESS_KEY ...), or else the development key pair of
// the server's data directory. `hots3 admin` asks for an admin's: HOTS3_* come first.
aws::Credentials credentials(const TierCommandOptions& o) {
  aws::Credentials c;
  const auto from_env = [&c](const char* access, const char* secret, const char* token) {
    if (!c.access_key.empty()) return;
    c.access_key = env(access);
    c.secret_key = env(secret);
    c.session_token = token != nullptr ? env(token) : std::string();
    if (c.secret_key.empty()) c.access_key.clear();
  };
  if (o.admin) from_env("HOTS3_ACCESS_KEY", "HOTS3_SECRET_KEY", nullptr);
  from_env("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN");
  from_env("HOTS3_ACCESS_KEY", "HOTS3_SECRET_KEY", nullptr);
  if (c.access_key.empty()) {
    if (auto dev = config::development_credentials(o.data_dir.empty() ? "./data" : o.data_dir)) {
      c.access_key = dev->access_key;
      c.secret_key = dev->secret_key;
    }
  }
  if (c.access_key.empty()) {
    throw std::runtime_error(
        "no credentials: set HOTS3_ACCESS_KEY and HOTS3_SECRET_KEY (or AWS_ACCESS_KEY_ID and "
        "AWS_SECRET_ACCESS_KEY), or name the server's data directory with --data");
  }
  c.region = env("AWS_DEFAULT_REGION");
  if (c.region.empty()) c.region = "us-east-1";
  return c;
}

// Says on stderr why an exchange of `hots3 tier <command>` with the server (`what`: the endpoint,
// a bucket or a key) failed: no answer, or an answer that is not a success.
void say_failed(const char* command, const std::string& what,
                const Result<http::Client::Reply>& reply) {
  if (!reply) {
    std::fprintf(stderr, "hots3 tier %s: %s: %s\n", command, what.c_str(),
                 reply.error().message().c_str());
    return;
  }
  const auto e = s3client::parse_error(reply->body);
  std::fprintf(stderr, "hots3 tier %s: HTTP %u %s: %s\n", command, reply->head.status,
               e ? e->code.c_str() : "", e ? e->message.c_str() : reply->body.c_str());
}

// A bar of `done` out of `total` for a line a terminal redraws: "[#######.........]  42% ".
std::string progress_bar(std::uint64_t done, std::uint64_t total) {
  constexpr std::size_t kWidth = 24;
  const double fraction =
      total == 0 ? 1.0 : static_cast<double>(std::min(done, total)) / static_cast<double>(total);
  const auto filled = static_cast<std::size_t>(fraction * kWidth);
  return fmt::format("[{}{}] {:3.0f}% ", std::string(filled, '#'),
                     std::string(kWidth - filled, '.'), fraction * 100);
}

std::string child_text(const xml::XmlElement& element, const char* name) {
  auto e = element.child(name);
  return e ? e->text() : std::string();
}
std::string child_text(const xml::XmlDocument& doc, const char* name) {
  return child_text(doc.root(), name);
}

}  // namespace

s3client::Options signed_options(const TierCommandOptions& o) {
  s3client::Options s3;
  s3.http = client_options(o);
  s3.credentials = credentials(o);
  return s3;
}

int tier_status(const TierCommandOptions& options, const std::string& bucket, bool json) {
  asio::io_context io;
  http::Client client(io.get_executor(), client_options(options));
  http::ClientRequest request;
  request.target = json ? "/health/upstream" : "/health/upstream?format=text";
  if (!bucket.empty()) request.target += (json ? "?bucket=" : "&bucket=") + bucket;
  auto reply = run(io, client.request(std::move(request), std::string()));
  if (!reply) {
    std::fprintf(stderr, "hots3 tier status: %s: %s\n", options.endpoint.c_str(),
                 reply.error().message().c_str());
    return 1;
  }
  if (reply->head.status == 404 || bucket.empty()) {
    std::fputs(reply->body.c_str(), reply->head.status == 404 ? stderr : stdout);
    return reply->head.status == 200 ? 0 : 1;
  }
  // One bucket: its parked jobs too, keys and all (which the unsigned report never names).
  s3client::Client signed_client(io.get_executor(), signed_options(options));
  s3client::Request parked_request;
  parked_request.bucket = bucket;
  parked_request.query = {{"x-hots3-parked", ""}};
  io.restart();
  auto parked = run(io, signed_client.request(std::move(parked_request), std::string()));
  const auto doc = parked ? xml::XmlDocument::parse(parked->body) : std::nullopt;
  if (!parked || parked->head.status != 200 || !doc) {
    say_failed("status", bucket, parked);
    return 1;
  }
  std::string jobs;  // as JSON, or lines for people
  for (const xml::XmlElement& job : doc->root().children()) {
    if (job.name() != "Job") continue;
    if (json) {
      jobs += fmt::format("{}{{\"key\":{},\"action\":{},\"attempts\":{},\"error\":{}}}",
                          jobs.empty() ? "" : ",", log::json_quoted(child_text(job, "Key")),
                          log::json_quoted(child_text(job, "Action")), child_text(job, "Attempts"),
                          log::json_quoted(child_text(job, "Error")));
    } else {
      jobs += fmt::format("  parked {} {} ({} attempts): {}\n", child_text(job, "Action"),
                          child_text(job, "Key"), child_text(job, "Attempts"),
                          child_text(job, "Error"));
    }
  }
  std::string out = reply->body;
  if (json) {
    // The report is one JSON object: the jobs join it as one more member.
    const std::size_t end = out.rfind('}');
    out = fmt::format("{},\"parked_jobs\":[{}]}}\n", out.substr(0, end), jobs);
  } else {
    // After the bucket's own lines, before the device's.
    const std::size_t at = out.find("\nowed to upstreams: ");
    out.insert(at == std::string::npos ? out.size() : at + 1, jobs);
  }
  std::fputs(out.c_str(), stdout);
  return reply->head.status == 200 ? 0 : 1;
}

int tier_flush(const TierCommandOptions& options, const std::string& bucket,
               const std::string& prefix, bool wait) {
  asio::io_context io;
  s3client::Client client(io.get_executor(), signed_options(options));
  const bool terminal = isatty(fileno(stdout)) != 0;
  std::string seq;
  std::uint64_t first_owed = 0;  // at the first answer: what the bar counts down from
  for (;;) {
    s3client::Request request;
    request.method = "POST";
    request.bucket = bucket;
    request.query = {{"x-hots3-flush", ""}, {"prefix", prefix}};
    if (!seq.empty()) request.query.push_back({"seq", seq});
    if (!wait) request.query.push_back({"wait", "false"});
    io.restart();
    auto reply = run(io, client.request(std::move(request), std::string()));
    if (!reply || reply->head.status != 200) {
      say_failed("flush", options.endpoint, reply);
      return 1;
    }
    const auto doc = xml::XmlDocument::parse(reply->body);
    if (!doc) {
      std::fprintf(stderr, "hots3 tier flush: an answer that is not XML\n");
      return 1;
    }
    seq = child_text(*doc, "Seq");
    const std::string owed = child_text(*doc, "Owed");
    const std::string parked = child_text(*doc, "Parked");
    if (owed == "0") {
      std::printf("%s%s/%s: everything acknowledged before the flush is upstream\n",
                  terminal && first_owed > 0 ? "\n" : "", bucket.c_str(), prefix.c_str());
      return 0;
    }
    if (!wait) {
      std::printf("%s/%s: %s changes are being sent up (%s parked)\n", bucket.c_str(),
                  prefix.c_str(), owed.c_str(), parked.c_str());
      return 0;
    }
    if (owed == parked) {
      std::fprintf(stderr, "%s/%s: %s changes were refused by the upstream and are parked: %s\n",
                   bucket.c_str(), prefix.c_str(), parked.c_str(),
                   child_text(*doc, "ParkedError").c_str());
      return 1;
    }
    const std::uint64_t owed_now = parse_decimal<std::uint64_t>(owed).value_or(0);
    first_owed = std::max(first_owed, owed_now);
    // A terminal gets one line redrawn with a bar of what went up since the first answer.
    std::printf("%s%s%s/%s: %s changes still owed (%s parked)%s", terminal ? "\r" : "",
                terminal ? progress_bar(first_owed - owed_now, first_owed).c_str() : "",
                bucket.c_str(), prefix.c_str(), owed.c_str(), parked.c_str(),
                terminal ? "   " : "\n");
    std::fflush(stdout);
  }
}

namespace {

// POST (or `method`) /bucket?<query> (a hots3 operation on a bound bucket) with `body`, signed;
// its XML answer, or none when it failed (said on stderr as "hots3 tier <command>: ...").
std::optional<xml::XmlDocument> post_to_bucket(const TierCommandOptions& options,
                                               const char* command, const std::string& bucket,
                                               std::vector<aws::QueryParameter> query,
                                               const char* method = "POST", std::string body = {}) {
  asio::io_context io;
  s3client::Client client(io.get_executor(), signed_options(options));
  s3client::Request request;
  request.method = method;
  request.bucket = bucket;
  request.query = std::move(query);
  request.content_length = body.size();
  auto reply = run(io, client.request(std::move(request), std::move(body)));
  auto doc = reply ? xml::XmlDocument::parse(reply->body) : std::optional<xml::XmlDocument>();
  if (!reply || reply->head.status != 200 || !doc) {
    say_failed(command, options.endpoint, reply);
    return std::nullopt;
  }
  return doc;
}

// key=K or prefix=P, as the pin operations take them.
aws::QueryParameter pin_target(const PinTarget& target) {
  return target.key ? aws::QueryParameter{"key", *target.key}
                    : aws::QueryParameter{"prefix", target.prefix};
}

std::string pin_name(const std::string& bucket, const PinTarget& target) {
  return bucket + "/" + (target.key ? *target.key : target.prefix + "*");
}

}  // namespace

int tier_evict(const TierCommandOptions& options, const std::string& bucket,
               const std::string& prefix) {
  const auto doc =
      post_to_bucket(options, "evict", bucket, {{"x-hots3-evict", ""}, {"prefix", prefix}});
  if (!doc) return 1;
  std::printf("%s/%s: %s objects evicted, %s bytes freed\n", bucket.c_str(), prefix.c_str(),
              child_text(*doc, "Objects").c_str(), child_text(*doc, "Bytes").c_str());
  return 0;
}

int tier_adopt(const TierCommandOptions& options, const std::string& bucket,
               const std::string& prefix, bool sync) {
  const char* what = sync ? "sync" : "adopt";
  std::uint64_t adopted = 0;
  std::uint64_t bytes = 0;
  std::uint64_t present = 0;
  std::uint64_t skipped = 0;
  std::uint64_t replaced = 0;
  std::uint64_t removed = 0;
  const auto add = [](std::uint64_t& total, const std::string& text) {
    total += parse_decimal<std::uint64_t>(text).value_or(0);
  };
  const auto n = [](std::uint64_t v) { return static_cast<unsigned long long>(v); };
  std::string start_after;
  for (;;) {
    std::vector<aws::QueryParameter> query = {{"x-hots3-adopt", ""}, {"prefix", prefix}};
    if (sync) query.push_back({"sync", ""});
    if (!start_after.empty()) query.push_back({"start-after", start_after});
    const auto doc = post_to_bucket(options, what, bucket, std::move(query));
    if (!doc) {
      std::fprintf(stderr, "%s/%s: %llu objects adopted before that; run it again to go on\n",
                   bucket.c_str(), prefix.c_str(), n(adopted));
      return 1;
    }
    add(adopted, child_text(*doc, "Adopted"));
    add(bytes, child_text(*doc, "Bytes"));
    add(present, child_text(*doc, "Present"));
    add(skipped, child_text(*doc, "Skipped"));
    add(replaced, child_text(*doc, "Replaced"));
    add(removed, child_text(*doc, "Removed"));
    const bool more = child_text(*doc, "IsTruncated") == "true";
    const std::string followed =
        sync ? fmt::format(", {} replaced, {} removed", replaced, removed) : std::string();
    std::printf("%s/%s: %llu objects adopted (%s), %llu already here, %llu skipped%s%s\n",
                bucket.c_str(), prefix.c_str(), n(adopted), format_size(bytes).c_str(), n(present),
                n(skipped), followed.c_str(), more ? " so far" : "");
    std::fflush(stdout);
    if (!more) return 0;
    auto next = aws::percent_decode(child_text(*doc, "NextStartAfter"));
    if (!next || next->empty() || *next <= start_after) {
      std::fprintf(stderr, "hots3 tier %s: the server's listing does not move on\n", what);
      return 1;
    }
    start_after = std::move(*next);
  }
}

namespace {

// Starts a prefetch job; its id in `id`. false when it did not start (said on stderr).
bool start_prefetch(const TierCommandOptions& options, const std::string& bucket,
                    const std::string& prefix, const std::string& list_file, std::string& id) {
  std::string list;
  if (!list_file.empty()) {
    std::ifstream in(list_file, std::ios::binary);
    list.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) {
      std::fprintf(stderr, "hots3 tier prefetch: %s cannot be read\n", list_file.c_str());
      return false;
    }
    if (list.find_first_not_of("\r\n") == std::string::npos) {
      std::fprintf(stderr, "hots3 tier prefetch: %s names no key\n", list_file.c_str());
      return false;
    }
  }
  const auto started = post_to_bucket(options, "prefetch", bucket,
                                      {{"x-hots3-prefetch", ""}, {"prefix", prefix}}, "POST", list);
  if (!started) return false;
  id = child_text(*started, "Id");
  std::printf(
      "%s/%s: prefetch %s started: %s objects (%s) to fetch\n", bucket.c_str(), prefix.c_str(),
      id.c_str(), child_text(*started, "Objects").c_str(),
      format_size(parse_decimal<std::uint64_t>(child_text(*started, "Bytes")).value_or(0)).c_str());
  std::fflush(stdout);
  return true;
}

}  // namespace

int tier_prefetch(const TierCommandOptions& options, const std::string& bucket,
                  const PrefetchTarget& target) {
  std::string id = target.job;
  if (id.empty()) {
    if (!start_prefetch(options, bucket, target.prefix, target.list_file, id)) return 1;
    if (!target.wait) return 0;
  }
  const bool terminal = isatty(fileno(stdout)) != 0;
  // Asked often enough that the end is seen at once; said every second.
  constexpr auto kAsk = std::chrono::milliseconds(250);
  constexpr int kAsksPerLine = 4;
  for (int asked = 0;; ++asked) {
    const auto doc =
        post_to_bucket(options, "prefetch", bucket, {{"x-hots3-prefetch", ""}, {"id", id}}, "GET");
    const auto job = doc ? doc->root().child("Job") : std::nullopt;
    if (!job) return 1;
    const auto number = [&job](const char* name) {
      return parse_decimal<std::uint64_t>(child_text(*job, name)).value_or(0);
    };
    const std::uint64_t objects = number("Objects");
    const std::uint64_t bytes = number("Bytes");
    const std::uint64_t done_objects = objects - std::min(objects, number("LeftObjects"));
    const std::uint64_t done_bytes = bytes - std::min(bytes, number("LeftBytes"));
    const double seconds = static_cast<double>(number("ElapsedMs")) / 1000.0;
    const double rate = seconds > 0 ? static_cast<double>(done_bytes) / seconds : 0.0;
    const bool ended = child_text(*job, "Ended") == "true";
    if (!ended && asked % kAsksPerLine != 0) {
      std::this_thread::sleep_for(kAsk);
      continue;
    }
    const std::string eta =
        ended || rate <= 0
            ? std::string("-")
            : fmt::format("{:.0f} s", static_cast<double>(bytes - done_bytes) / rate);
    std::printf("%s%sprefetch %s: %llu/%llu objects, %s/%s, %s/s, %llu failed, ETA %s%s",
                terminal ? "\r" : "", terminal ? progress_bar(done_bytes, bytes).c_str() : "",
                id.c_str(), static_cast<unsigned long long>(done_objects),
                static_cast<unsigned long long>(objects), format_size(done_bytes).c_str(),
                format_size(bytes).c_str(), format_size(static_cast<std::uint64_t>(rate)).c_str(),
                static_cast<unsigned long long>(number("Failed")), eta.c_str(),
                terminal && !ended ? "" : "\n");
    std::fflush(stdout);
    if (ended) return number("Failed") == 0 ? 0 : 1;
    std::this_thread::sleep_for(kAsk);
  }
}

int tier_pin(const TierCommandOptions& options, const std::string& bucket,
             const PinTarget& target) {
  const auto doc =
      post_to_bucket(options, "pin", bucket, {{"x-hots3-pin", ""}, pin_target(target)});
  if (!doc) return 1;
  std::printf(
      "%s: pinned; the bucket's pins hold %s of at most %s bytes; %s objects are being "
      "fetched\n",
      pin_name(bucket, target).c_str(), child_text(*doc, "PinnedBytes").c_str(),
      child_text(*doc, "MaxBytes").c_str(), child_text(*doc, "Fetching").c_str());
  return 0;
}

int tier_unpin(const TierCommandOptions& options, const std::string& bucket,
               const PinTarget& target) {
  const auto doc =
      post_to_bucket(options, "unpin", bucket, {{"x-hots3-unpin", ""}, pin_target(target)});
  if (!doc) return 1;
  const bool still = child_text(*doc, "StillPinned") == "true";
  std::printf("%s: %s pins removed%s\n", pin_name(bucket, target).c_str(),
              child_text(*doc, "Removed").c_str(),
              still ? "; still pinned by a glob of the binding or a wider prefix" : "");
  return 0;
}

namespace {

// One object of a listing, with the answer to its HEAD.
struct Headed {
  std::string key;
  std::string size;  // as listed
  std::string etag;  // as listed
  // nullptr: gone since the listing (404); else 200, or 500 for a version lost before upload
  const http::ClientResponseHead* head = nullptr;
};

// A page of ListObjectsV2 under `prefix` at a time, then a HEAD of each key on it (with
// `headers`), each told to `seen`. 0, or 1 once a request failed (said on stderr as `command`'s).
asio::awaitable<int> head_each(s3client::Client& client, const char* command, std::string bucket,
                               std::string prefix, std::vector<http::Header> headers,
                               std::function<void(const Headed&)> seen) {
  std::string token;
  for (;;) {
    s3client::Request list;
    list.bucket = bucket;
    list.query = {{"list-type", "2"}, {"prefix", prefix}};
    if (!token.empty()) list.query.push_back({"continuation-token", token});
    auto listing = client.request(std::move(list), std::string());
    auto listed = co_await std::move(listing);
    if (!listed || listed->head.status != 200) {
      say_failed(command, bucket, listed);
      co_return 1;
    }
    const auto doc = xml::XmlDocument::parse(listed->body);
    if (!doc) {
      std::fprintf(stderr, "hots3 tier %s: a listing that is not XML\n", command);
      co_return 1;
    }
    for (const xml::XmlElement& entry : doc->root().children()) {
      if (entry.name() != "Contents") continue;
      Headed object;
      object.key = child_text(entry, "Key");
      object.size = child_text(entry, "Size");
      object.etag = child_text(entry, "ETag");
      s3client::Request head;
      head.method = "HEAD";
      head.bucket = bucket;
      head.key = object.key;
      head.headers = headers;
      auto heading = client.request(std::move(head), std::string());
      auto headed = co_await std::move(heading);
      // (A version lost before upload answers 500, and says so.)
      if (headed && (headed->head.status == 200 ||
                     (headed->head.status == 500 &&
                      headed->head.find("x-hots3-tier").value_or("") == "lost"))) {
        object.head = &headed->head;
      } else if (!headed || headed->head.status != 404) {
        say_failed(command, object.key, headed);
        co_return 1;
      }
      seen(object);
    }
    const auto more = doc->root().child("IsTruncated");
    const auto next = doc->root().child("NextContinuationToken");
    if (!more || more->text() != "true" || !next) break;
    token = next->text();
  }
  co_return 0;
}

std::string counted(const std::map<std::string, std::uint64_t>& counts) {
  std::string out;
  for (const auto& [what, n] : counts) out += fmt::format(", {} {}", n, what);
  return out;
}

// Each object's x-hots3-tier and x-hots3-pinned: a line per object, then the counts.
asio::awaitable<int> list_states(s3client::Client& client, std::string bucket, std::string prefix) {
  std::map<std::string, std::uint64_t> states;  // state: objects
  std::uint64_t objects = 0;
  std::uint64_t pinned = 0;
  // (x-hots3-local: a bucket in cache mode lists what its upstream holds, and a HEAD of a key it
  // does not hold would record it.)
  auto walking =
      head_each(client, "ls", bucket, prefix, {{"x-hots3-local", "1"}}, [&](const Headed& o) {
        // (Absent: deleted since the listing, or in cache mode, only upstream and never read here.)
        const std::string state =
            o.head ? std::string(o.head->find("x-hots3-tier").value_or("local")) : "absent";
        const bool is_pinned = o.head && o.head->find("x-hots3-pinned").value_or("") == "true";
        ++objects;
        ++states[state];
        if (is_pinned) ++pinned;
        std::printf("%-6s %-6s %14s %s\n", state.c_str(), is_pinned ? "pinned" : "-",
                    o.size.c_str(), o.key.c_str());
      });
  if (const int failed = co_await std::move(walking)) co_return failed;
  std::printf("%s/%s: %llu objects%s; %llu pinned\n", bucket.c_str(), prefix.c_str(),
              static_cast<unsigned long long>(objects), counted(states).c_str(),
              static_cast<unsigned long long>(pinned));
  co_return 0;
}

// Each object asked about again (a HEAD with x-hots3-revalidate: 1): a line per object whose
// state here changed, then the counts.
asio::awaitable<int> revalidate_each(s3client::Client& client, std::string bucket,
                                     std::string prefix) {
  std::map<std::string, std::uint64_t> found;  // what became of them: objects
  std::uint64_t objects = 0;
  auto walking = head_each(client, "revalidate", bucket, prefix, {{"x-hots3-revalidate", "1"}},
                           [&](const Headed& o) {
                             std::string what = "gone";
                             if (o.head && o.head->status != 200) {
                               what = "lost";
                             } else if (o.head) {
                               const std::string said(o.head->find("x-hots3-cache").value_or(""));
                               const bool other = o.head->find("ETag").value_or("") != o.etag;
                               what = other ? "replaced" : said == "stale" ? "stale" : "current";
                             }
                             ++objects;
                             ++found[what];
                             if (what != "current")
                               std::printf("%-8s %s\n", what.c_str(), o.key.c_str());
                           });
  if (const int failed = co_await std::move(walking)) co_return failed;
  std::printf("%s/%s: %llu objects%s\n", bucket.c_str(), prefix.c_str(),
              static_cast<unsigned long long>(objects), counted(found).c_str());
  co_return 0;
}

// hots3 tier reconcile, of a bucket not in cache mode: each key's version asked about upstream,
// a line for each that was not as it should be there (requeued: the upstream had lost it, it
// goes up again; replaced: the upstream holds another, which takes its place here; gone: neither
// holds it now; stale: the upstream did not say; lost: lost here before upload, or evicted here
// and lost upstream).
asio::awaitable<int> reconcile_each(s3client::Client& client, std::string bucket,
                                    std::string prefix) {
  std::map<std::string, std::uint64_t> found;  // what the upstream was found to hold: objects
  std::uint64_t objects = 0;
  auto walking = head_each(client, "reconcile", bucket, prefix, {{"x-hots3-revalidate", "1"}},
                           [&](const Headed& o) {
                             std::string what = "gone";
                             if (o.head && o.head->status != 200) {
                               what = "lost";
                             } else if (o.head) {
                               what = o.head->find("x-hots3-revalidation").value_or("current");
                             }
                             ++objects;
                             ++found[what];
                             if (what != "current")
                               std::printf("%-9s %s\n", what.c_str(), o.key.c_str());
                           });
  if (const int failed = co_await std::move(walking)) co_return failed;
  std::printf("%s/%s: %llu objects%s\n", bucket.c_str(), prefix.c_str(),
              static_cast<unsigned long long>(objects), counted(found).c_str());
  co_return 0;
}

}  // namespace

int tier_reconcile(const TierCommandOptions& options, const std::string& bucket,
                   const std::string& prefix) {
  // The binding's mode, from the health report: a bucket in cache mode follows its upstream
  // (tier sync), the others hold what the upstream must have.
  asio::io_context io;
  http::Client plain(io.get_executor(), client_options(options));
  http::ClientRequest request;
  request.target = "/health/upstream?bucket=" + bucket;
  auto reply = run(io, plain.request(std::move(request), std::string()));
  // (A bucket that is not ok answers 503 with its report; one that is not bound, 404.)
  if (!reply || reply->head.status == 404) {
    std::fprintf(stderr, "hots3 tier reconcile: %s: %s\n", bucket.c_str(),
                 reply ? "not a bound bucket of this server" : reply.error().message().c_str());
    return 1;
  }
  if (reply->body.find("\"mode\":\"cache\"") != std::string::npos) {
    return tier_adopt(options, bucket, prefix, true);
  }
  s3client::Client client(io.get_executor(), signed_options(options));
  io.restart();
  return run(io, reconcile_each(client, bucket, prefix));
}

int tier_ls(const TierCommandOptions& options, const std::string& bucket,
            const std::string& prefix) {
  asio::io_context io;
  s3client::Client client(io.get_executor(), signed_options(options));
  return run(io, list_states(client, bucket, prefix));
}

int tier_revalidate(const TierCommandOptions& options, const std::string& bucket,
                    const std::string& prefix) {
  asio::io_context io;
  s3client::Client client(io.get_executor(), signed_options(options));
  return run(io, revalidate_each(client, bucket, prefix));
}

int tier_settle_lost(const TierCommandOptions& options, const std::string& bucket,
                     const PinTarget& target, bool accept_older) {
  std::map<std::string, std::uint64_t> outcomes;  // outcome: versions
  std::string start_after;
  for (;;) {
    std::vector<aws::QueryParameter> query = {{"x-hots3-lost", ""},
                                              {"settle", accept_older ? "accept-older" : "forget"},
                                              pin_target(target)};
    if (!start_after.empty()) query.push_back({"start-after", start_after});
    const auto doc = post_to_bucket(options, "recover", bucket, std::move(query));
    if (!doc) return 1;
    for (const xml::XmlElement& v : doc->root().children()) {
      if (v.name() != "Version") continue;
      const std::string key = aws::percent_decode(child_text(v, "Key")).value_or("");
      const std::string outcome = child_text(v, "Outcome");
      ++outcomes[outcome];
      std::printf("%-12s %s/%s%s\n", outcome.c_str(), bucket.c_str(), key.c_str(),
                  outcome == "older"
                      ? fmt::format(" {} {}", child_text(v, "Size"), child_text(v, "ETag")).c_str()
                      : "");
    }
    if (child_text(*doc, "IsTruncated") != "true") break;
    auto next = aws::percent_decode(child_text(*doc, "NextStartAfter"));
    if (!next || next->empty() || *next <= start_after) {
      std::fprintf(stderr, "hots3 tier recover: the server's listing does not move on\n");
      return 1;
    }
    start_after = std::move(*next);
  }
  // ("older": the upstream's version took its place.)
  std::printf("%s: lost versions: %s\n", pin_name(bucket, target).c_str(),
              outcomes.empty() ? "none" : counted(outcomes).substr(2).c_str());
  if (outcomes.contains("not-upstream")) {
    std::printf("the upstream holds nothing of the not-upstream ones: `--forget` settles them\n");
    return 1;
  }
  return 0;
}

}  // namespace hots3::app
