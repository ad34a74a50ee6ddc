// docs/wire-protocol.md must match net/schema/pace.fbs: every table's fields
// (name, type, default) in order, the union type ids and the enum values.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "common/read_file.h"
#include "net/messages.h"

namespace pace::net {
namespace {

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\n");
  size_t e = s.find_last_not_of(" \t\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// The schema without comments.
std::string Schema() {
  std::string text = ReadFile(PACE_SOURCE_DIR "/net/schema/pace.fbs");
  return std::regex_replace(text, std::regex("//[^\n]*"), "");
}

std::string Doc() { return ReadFile(PACE_SOURCE_DIR "/docs/wire-protocol.md"); }

struct Field {
  std::string name;
  std::string type;
  std::string def;  // empty if none
};

std::vector<Field> ParseFields(const std::string& body) {
  std::vector<Field> out;
  std::stringstream ss(body);
  std::string item;
  while (std::getline(ss, item, ';')) {
    item = Trim(item);
    if (item.empty()) continue;
    std::smatch m;
    EXPECT_TRUE(
        std::regex_match(item, m, std::regex(R"((\w+)\s*:\s*([\w\[\]]+)\s*(?:=\s*(\w+))?.*)")))
        << "unparsed field: " << item;
    out.push_back(Field{m[1], m[2], m[3]});
  }
  return out;
}

TEST(WireDocTest, SchemaAndDocumentExist) {
  ASSERT_FALSE(Schema().empty());
  ASSERT_FALSE(Doc().empty());
  EXPECT_NE(Doc().find("wire version " + std::to_string(kWireVersion)), std::string::npos);
}

TEST(WireDocTest, EveryTableIsDocumentedFieldByField) {
  std::string schema = Schema();
  std::string doc = Doc();
  std::regex table_re(R"((table|struct)\s+(\w+)\s*\{([^}]*)\})");
  int tables = 0;
  for (std::sregex_iterator it(schema.begin(), schema.end(), table_re), end; it != end; ++it) {
    std::string name = (*it)[2];
    std::vector<Field> fields = ParseFields((*it)[3]);
    ++tables;
    SCOPED_TRACE(name);
    if (name == "Message") {
      ASSERT_EQ(fields.size(), 1u);
      EXPECT_NE(doc.find("`Message` holds one union member `" + fields[0].name + "`"),
                std::string::npos);
      continue;
    }
    if (name == "RowRef" || name == "Counter") {
      // Documented inline as `Name{a: t, b: t}` / `{a: t, b: t}`.
      std::string inline_form = "{";
      for (size_t i = 0; i < fields.size(); ++i) {
        inline_form += (i ? ", " : "") + fields[i].name + ": " + fields[i].type;
      }
      inline_form += "}";
      EXPECT_NE(std::regex_replace(doc, std::regex("\\s+"), " ").find(inline_form),
                std::string::npos)
          << "missing " << inline_form;
      continue;
    }
    size_t start = doc.find("**" + name + "** —");
    ASSERT_NE(start, std::string::npos) << "no paragraph **" << name << "** —";
    size_t stop = doc.find("\n\n", start);
    std::string para = std::regex_replace(doc.substr(start, stop - start), std::regex("\\s+"), " ");
    size_t pos = 0;
    for (const Field& f : fields) {
      std::string want = "`" + f.name + ": " + f.type + (f.def.empty() ? "`" : " = " + f.def + "`");
      size_t at = para.find(want, pos);
      EXPECT_NE(at, std::string::npos) << "field " << want << " missing or out of order";
      if (at != std::string::npos) pos = at;
    }
  }
  EXPECT_GE(tables, 20);
}

TEST(WireDocTest, UnionTypeIdsAreDocumented) {
  std::string schema = Schema();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(schema, m, std::regex(R"(union\s+Body\s*\{([^}]*)\})")));
  std::stringstream ss(m[1].str());
  std::string item;
  int id = 0;
  std::string doc = Doc();
  while (std::getline(ss, item, ',')) {
    item = Trim(item);
    if (item.empty()) continue;
    ++id;
    std::string row = "| " + std::to_string(id) + " | `" + item + "` |";
    EXPECT_NE(doc.find(row), std::string::npos) << "missing row " << row;
  }
  EXPECT_EQ(id, static_cast<int>(std::variant_size_v<Message>));
}

TEST(WireDocTest, EnumValuesAreDocumented) {
  std::string schema = Schema();
  std::string doc = Doc();
  std::regex enum_re(R"(enum\s+(\w+)\s*:\s*ubyte\s*\{([^}]*)\})");
  int enums = 0;
  for (std::sregex_iterator it(schema.begin(), schema.end(), enum_re), end; it != end; ++it) {
    ++enums;
    std::string row = "| `" + (*it)[1].str() + "` | ";
    std::stringstream ss((*it)[2].str());
    std::string item;
    bool first = true;
    while (std::getline(ss, item, ',')) {
      item = Trim(item);
      if (item.empty()) continue;
      std::smatch m;
      ASSERT_TRUE(std::regex_match(item, m, std::regex(R"((\w+)\s*=\s*(\d+))"))) << item;
      row += (first ? "" : ", ") + m[1].str() + " " + m[2].str();
      first = false;
    }
    row += " |";
    EXPECT_NE(doc.find(row), std::string::npos) << "missing enum row " << row;
  }
  EXPECT_EQ(enums, 6);
}

}  // namespace
}  // namespace pace::net
