// S3's XML both ways: request bodies (CompleteMultipartUpload, Delete, CreateBucketConfiguration,
// AccessControlPolicy) through the reader, walked as the handlers walk them; and any text through
// the writer, whose output must always parse again, whatever bytes the text holds (keys are
// chosen by clients).

#include "s3/request_xml.h"
#include "s3/s3_xml.h"

#include <cstddef>
#include <cstdint>
#include <fuzzer/FuzzedDataProvider.h>
#include <string>

namespace {

void walk(const hots3::s3::XmlElement& element, int depth) {
  if (depth > 64) return;
  (void)element.name();
  (void)element.text();
  for (const auto& child : element.children()) walk(child, depth + 1);
  (void)element.child("Part");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  const std::string text = in.ConsumeRandomLengthString(4096);
  const std::string body = in.ConsumeRemainingBytesAsString();
  if (auto doc = hots3::s3::XmlDocument::parse(body)) walk(doc->root(), 0);
  (void)hots3::s3::parse_delete_request(body);
  (void)hots3::s3::parse_complete_request(body);
  (void)hots3::s3::parse_create_bucket_configuration(body);
  (void)hots3::s3::acl_is_owner_full_control(body, text);
  (void)hots3::s3::check_restore_request(body);

  hots3::s3::XmlWriter writer("ListBucketResult");
  writer.element("Key", text);
  writer.open("Contents");
  writer.attribute("name", text);
  writer.text(text);
  writer.close();
  const std::string out = writer.finish();
  auto reread = hots3::s3::XmlDocument::parse(out);
  if (!reread) __builtin_trap();  // a response that is not well-formed XML
  auto key = reread->root().child("Key");
  if (!key) __builtin_trap();
  return 0;
}
