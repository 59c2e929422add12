#include "hots3/xml/xml.h"

#include "hots3/common/assert.h"
#include "hots3/common/text.h"

#include <libxml/parser.h>
#include <libxml/tree.h>
#include <libxml/xmlwriter.h>

#include <limits>
#include <stdexcept>

namespace hots3::xml {
namespace {

const xmlChar* x(const std::string& s) { return reinterpret_cast<const xmlChar*>(s.c_str()); }

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// The length of the UTF-8 sequence at `text[i]` if it is well-formed and a character XML 1.0
// can carry (U+FFFE and U+FFFF are not); 0 otherwise.
std::size_t xml_character(std::string_view text, std::size_t i) {
  const std::size_t length = utf8_sequence_length(text, i);
  if (length == 3 && text[i] == '\xEF' && text[i + 1] == '\xBF' &&
      (text[i + 2] == '\xBE' || text[i + 2] == '\xBF')) {
    return 0;
  }
  return length;
}

}  // namespace

void append_xml_escaped(std::string& out, std::string_view text) {
  out.reserve(out.size() + text.size());
  for (std::size_t i = 0; i < text.size();) {
    const char c = text[i];
    switch (c) {
      case '&':
        out += "&amp;";
        ++i;
        continue;
      case '<':
        out += "&lt;";
        ++i;
        continue;
      case '>':
        out += "&gt;";
        ++i;
        continue;
      case '"':
        out += "&quot;";
        ++i;
        continue;
      case '\r':
        out += "&#13;";
        ++i;
        continue;  // a literal CR would be read back as LF
      case '\t':
      case '\n':
        out += c;
        ++i;
        continue;
      default:
        break;
    }
    if (static_cast<unsigned char>(c) < 0x20) {
      // XML 1.0 has no way to carry C0 control characters, not even as character references
      // ("&#1;" is not well-formed): a listing must parse whatever keys the bucket holds. With
      // encoding-type=url a client gets such keys exactly.
      out += kReplacement;
      ++i;
      continue;
    }
    const std::size_t length = xml_character(text, i);
    if (length == 0) {
      out += kReplacement;
      ++i;
    } else {
      out.append(text.substr(i, length));
      i += length;
    }
  }
}

struct XmlWriter::Impl {
  xmlBufferPtr buffer = nullptr;
  xmlTextWriterPtr writer = nullptr;
  std::string scratch_name;
  std::string scratch_text;
  ~Impl() {
    if (writer != nullptr) xmlFreeTextWriter(writer);  // also frees nothing of `buffer`
    if (buffer != nullptr) xmlBufferFree(buffer);
  }
  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  Impl(Impl&&) = delete;
  Impl& operator=(Impl&&) = delete;
};

XmlWriter::XmlWriter(std::string_view root, std::string_view xmlns)
    : impl_(std::make_unique<Impl>()) {
  impl_->buffer = xmlBufferCreate();
  impl_->writer = xmlNewTextWriterMemory(impl_->buffer, 0);
  H3_ASSERT(impl_->buffer != nullptr && impl_->writer != nullptr, "out of memory");
  xmlTextWriterStartDocument(impl_->writer, "1.0", "UTF-8", nullptr);
  open(root);
  if (!xmlns.empty()) attribute("xmlns", xmlns);
}

XmlWriter::~XmlWriter() = default;

void XmlWriter::open(std::string_view name) {
  impl_->scratch_name.assign(name);
  xmlTextWriterStartElement(impl_->writer, x(impl_->scratch_name));
}

void XmlWriter::attribute(std::string_view name, std::string_view value) {
  impl_->scratch_name.assign(name);
  impl_->scratch_text.clear();
  append_xml_escaped(impl_->scratch_text, value);
  xmlTextWriterStartAttribute(impl_->writer, x(impl_->scratch_name));
  write_raw(impl_->scratch_text);
  xmlTextWriterEndAttribute(impl_->writer);
}

void XmlWriter::close() { xmlTextWriterEndElement(impl_->writer); }

void XmlWriter::element(std::string_view name, std::string_view text) {
  open(name);
  this->text(text);
  // Closed with its end tag even when empty (<Prefix></Prefix>, as S3 writes it).
  xmlTextWriterFullEndElement(impl_->writer);
}

void XmlWriter::element(std::string_view name, std::uint64_t number) {
  element(name, std::to_string(number));
}

void XmlWriter::element(std::string_view name, bool value) {
  element(name, std::string_view(value ? "true" : "false"));
}

void XmlWriter::text(std::string_view text) {
  // Escaped here, with the text's own length: libxml2's writer takes C strings, which would end
  // at a NUL, and passes characters XML cannot carry through as they are.
  impl_->scratch_text.clear();
  append_xml_escaped(impl_->scratch_text, text);
  write_raw(impl_->scratch_text);
}

void XmlWriter::write_raw(std::string_view escaped) {
  H3_ASSERT(escaped.size() <= static_cast<std::size_t>(std::numeric_limits<int>::max()));
  xmlTextWriterWriteRawLen(impl_->writer, reinterpret_cast<const xmlChar*>(escaped.data()),
                           static_cast<int>(escaped.size()));
}

std::string XmlWriter::finish() {
  xmlTextWriterEndDocument(impl_->writer);  // closes open elements
  xmlTextWriterFlush(impl_->writer);
  std::string out(reinterpret_cast<const char*>(xmlBufferContent(impl_->buffer)),
                  static_cast<std::size_t>(xmlBufferLength(impl_->buffer)));
  // libxml2 ends the document with a newline after the declaration and at the end; S3 bodies
  // have none after the declaration's line either way, which clients do not care about.
  return out;
}

std::string_view XmlElement::name() const {
  const auto* node = static_cast<const xmlNode*>(node_);
  return reinterpret_cast<const char*>(node->name);
}

std::string XmlElement::text() const {
  const auto* node = static_cast<const xmlNode*>(node_);
  xmlChar* content = xmlNodeGetContent(node);
  std::string out = content != nullptr ? reinterpret_cast<const char*>(content) : "";
  xmlFree(content);
  return out;
}

std::vector<XmlElement> XmlElement::children() const {
  std::vector<XmlElement> out;
  const auto* node = static_cast<const xmlNode*>(node_);
  for (const xmlNode* c = node->children; c != nullptr; c = c->next) {
    if (c->type == XML_ELEMENT_NODE) out.push_back(XmlElement(c));
  }
  return out;
}

std::optional<XmlElement> XmlElement::child(std::string_view name) const {
  const auto* node = static_cast<const xmlNode*>(node_);
  for (const xmlNode* c = node->children; c != nullptr; c = c->next) {
    if (c->type == XML_ELEMENT_NODE && name == reinterpret_cast<const char*>(c->name))
      return XmlElement(c);
  }
  return std::nullopt;
}

std::optional<XmlDocument> XmlDocument::parse(std::string_view text) {
  if (text.size() > static_cast<std::size_t>(std::numeric_limits<int>::max())) return std::nullopt;
  // XML_PARSE_NONET: no network. No XML_PARSE_NOENT: entities are not substituted (no XXE);
  // no DTD loading. NOERROR/NOWARNING: a hostile body must not spam the logs.
  const int options =
      XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING | XML_PARSE_NOBLANKS;
  xmlDocPtr doc =
      xmlReadMemory(text.data(), static_cast<int>(text.size()), "request.xml", nullptr, options);
  if (doc == nullptr) return std::nullopt;
  if (xmlDocGetRootElement(doc) == nullptr || doc->intSubset != nullptr) {  // no DOCTYPE at all
    xmlFreeDoc(doc);
    return std::nullopt;
  }
  return XmlDocument(doc);
}

XmlDocument::~XmlDocument() {
  if (doc_ != nullptr) xmlFreeDoc(static_cast<xmlDocPtr>(doc_));
}

XmlElement XmlDocument::root() const {
  return XmlElement(xmlDocGetRootElement(static_cast<xmlDocPtr>(doc_)));
}

}  // namespace hots3::xml
