// Helpers shared by pacectl's offline and online commands.
#include <charconv>

#include "common/hash.h"
#include "tools/ctl/commands.h"
#include "tools/ctl/json_writer.h"
#include "tools/ctl/value_format.h"

namespace pace::ctl {

Status ParseRow(std::string_view text, uint64_t* row) {
  uint64_t v = 0;
  auto r = std::from_chars(text.data(), text.data() + text.size(), v, 10);
  if (text.empty() || r.ec != std::errc() || r.ptr != text.data() + text.size()) {
    return Status::InvalidArgument("bad row '" + std::string(text) +
                                   "': expected a row number (an unsigned 64-bit integer)");
  }
  *row = v;
  return Status::OK();
}

Status UnknownTable(std::string_view name, const std::vector<TableSchema>& tables) {
  std::string names;
  for (const TableSchema& t : tables) {
    if (!names.empty()) names += ", ";
    names += t.name;
  }
  return Status::NotFound(
      "unknown table '" + std::string(name) + "' (" +
      (names.empty() ? std::string("the store has no tables") : "tables: " + names) + ")");
}

void WriteTables(const CtlContext& ctx, const std::vector<TableSchema>& tables) {
  if (ctx.options.json) {
    JsonWriter w(&ctx.out);
    w.BeginObject();
    w.Key("tables");
    w.BeginArray();
    for (const TableSchema& t : tables) SchemaJson(t, &w);
    w.EndArray();
    w.EndObject();
    ctx.out << '\n';
    return;
  }
  if (tables.empty()) {
    ctx.out << "(no tables)\n";
    return;
  }
  std::vector<std::vector<std::string>> rows;
  rows.push_back(
      {"id", "name", "kind", "type", "width", "consistency", "staleness", "initializer"});
  for (const TableSchema& t : tables) {
    rows.push_back({std::to_string(t.id), t.name, std::string(RowKindName(t.kind)),
                    std::string(ElementTypeName(t.type)), std::to_string(t.width),
                    std::string(ConsistencyName(t.consistency)), StalenessText(t),
                    InitializerText(t.init)});
  }
  ctx.out << AlignColumns(rows);
}

std::string SchemaText(const TableSchema& s) {
  std::vector<std::vector<std::string>> rows = {
      {"  kind", std::string(RowKindName(s.kind))},
      {"  type", std::string(ElementTypeName(s.type))},
      {"  width", std::to_string(s.width) +
                      (s.kind == RowKind::kSparse && s.width == 0 ? " (any column)" : "")},
      {"  consistency", std::string(ConsistencyName(s.consistency))},
      {"  staleness", StalenessText(s)},
      {"  initializer", InitializerText(s.init)},
  };
  return AlignColumns(rows);
}

void WriteRowText(const CtlContext& ctx, const TableSchema& s, uint64_t row, std::string_view value,
                  int written) {
  ctx.out << "row " << row << ": " << RowText(s, value);
  if (written == 0) ctx.out << "  (never written: initializer value)";
  ctx.out << '\n';
}

void WriteRowJson(JsonWriter* w, const TableSchema& s, uint64_t row, std::string_view value,
                  int written) {
  w->BeginObject();
  w->MemberUint("row", row);
  if (written >= 0) w->MemberBool("written", written != 0);
  RowJsonMembers(s, value, w);
  w->EndObject();
}

std::string IdentityText(uint32_t shard_id, uint32_t num_shards, uint32_t num_clients) {
  return "shard " + std::to_string(shard_id) + " of " + std::to_string(num_shards) + ", " +
         std::to_string(num_clients) + (num_clients == 1 ? " client" : " clients");
}

Status CheckRowPlacement(const TableSchema& table, uint64_t row, uint32_t shard_id,
                         uint32_t num_shards) {
  if (num_shards <= 1) return Status::OK();
  uint32_t owner = ShardOf(table.id, row, num_shards);
  if (owner == shard_id) return Status::OK();
  return Status::InvalidArgument("row " + std::to_string(row) + " of table '" + table.name +
                                 "' lives on shard " + std::to_string(owner) +
                                 ", but this is shard " + std::to_string(shard_id) + " of " +
                                 std::to_string(num_shards) + "; ask that shard");
}

}  // namespace pace::ctl
