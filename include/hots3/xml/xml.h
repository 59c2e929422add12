#pragma once

// XML through libxml2 (which stays in src/xml/xml.cc): a writer for documents that must be
// well-formed whatever text goes into them, and a reader for small documents from untrusted
// senders. The reader ignores namespaces (clients of the same protocol send them or not), never
// expands entities beyond the predefined ones and character references, refuses DTDs, and never
// touches the network.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hots3::xml {

// Appends `text` as XML character data or an attribute value: markup characters and quotes
// escaped, and everything XML 1.0 cannot carry (C0 control characters but tab, line
// feed and carriage return, malformed UTF-8, U+FFFE, U+FFFF) replaced by U+FFFD, so that every
// document written is well-formed whatever a key holds.
void append_xml_escaped(std::string& out, std::string_view text);

// Element and attribute text goes through append_xml_escaped.
class XmlWriter {
 public:
  // Starts the document and its root element, with an xmlns attribute unless `xmlns` is empty.
  explicit XmlWriter(std::string_view root, std::string_view xmlns = {});
  ~XmlWriter();
  XmlWriter(const XmlWriter&) = delete;
  XmlWriter& operator=(const XmlWriter&) = delete;
  XmlWriter(XmlWriter&&) = delete;
  XmlWriter& operator=(XmlWriter&&) = delete;

  void open(std::string_view name);
  // An attribute of the element just opened (before its content).
  void attribute(std::string_view name, std::string_view value);
  void close();
  void element(std::string_view name, std::string_view text);
  // A literal would otherwise convert to bool rather than to string_view.
  void element(std::string_view name, const char* text) { element(name, std::string_view(text)); }
  void element(std::string_view name, const std::string& text) {
    element(name, std::string_view(text));
  }
  void element(std::string_view name, std::uint64_t number);
  void element(std::string_view name, bool value);
  // Text content of the element that is open.
  void text(std::string_view text);
  // Closes what is open and returns the document.
  std::string finish();

 private:
  void write_raw(std::string_view escaped);

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class XmlElement {
 public:
  [[nodiscard]] std::string_view name() const;  // local name, namespace ignored
  [[nodiscard]] std::string text() const;       // text content, entities decoded
  [[nodiscard]] std::vector<XmlElement> children() const;
  [[nodiscard]] std::optional<XmlElement> child(std::string_view name) const;

 private:
  friend class XmlDocument;
  explicit XmlElement(const void* node) : node_(node) {}
  const void* node_;
};

class XmlDocument {
 public:
  // nullopt for anything that is not well-formed XML (S3: MalformedXML).
  static std::optional<XmlDocument> parse(std::string_view text);
  ~XmlDocument();
  XmlDocument(XmlDocument&& other) noexcept : doc_(other.doc_) { other.doc_ = nullptr; }
  XmlDocument& operator=(XmlDocument&&) = delete;
  XmlDocument(const XmlDocument&) = delete;
  XmlDocument& operator=(const XmlDocument&) = delete;

  [[nodiscard]] XmlElement root() const;

 private:
  explicit XmlDocument(void* doc) : doc_(doc) {}
  void* doc_;
};

}  // namespace hots3::xml
