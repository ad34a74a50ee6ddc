// Internal to pacectl: the command implementations behind RunCtl and the
// helpers they share. Each command writes its output to ctx.out (text, or one
// JSON document with options.json) and returns a Status that RunCtl turns
// into the exit code (Corruption: 2, other errors: 1).
#ifndef PACE_TOOLS_CTL_COMMANDS_H_
#define PACE_TOOLS_CTL_COMMANDS_H_

#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/schema.h"
#include "common/status.h"
#include "storage/shard_store.h"
#include "tools/ctl/ctl.h"

namespace pace::ctl {

struct CtlContext {
  const CtlOptions& options;
  std::ostream& out;
  std::ostream& err;
};

// Positional arguments after the command name.
using Args = std::vector<std::string>;

// --- Shared helpers (output.cc) -----------------------------------------------

// Parses a row id: a decimal u64. InvalidArgument naming `text` otherwise.
Status ParseRow(std::string_view text, uint64_t* row);
// NotFound "unknown table 'foo' (tables: w, h)".
Status UnknownTable(std::string_view name, const std::vector<TableSchema>& tables);
// The `tables` listing, text or JSON.
void WriteTables(const CtlContext& ctx, const std::vector<TableSchema>& tables);
// Text lines "  kind  dense" ... describing a schema, two-space indented.
std::string SchemaText(const TableSchema& s);
// One value of a get/scan listing: text "row R: ..." or a JSON object
// {"row":R,["written":b,]"values":...}. written < 0: unknown (not shown).
void WriteRowText(const CtlContext& ctx, const TableSchema& s, uint64_t row, std::string_view value,
                  int written);
class JsonWriter;
void WriteRowJson(JsonWriter* w, const TableSchema& s, uint64_t row, std::string_view value,
                  int written);
// "shard 0 of 1, 2 clients".
std::string IdentityText(uint32_t shard_id, uint32_t num_shards, uint32_t num_clients);
// InvalidArgument if `row` of `table` is placed on another shard than this
// one (a get there would show the initializer, not the row's value).
Status CheckRowPlacement(const TableSchema& table, uint64_t row, uint32_t shard_id,
                         uint32_t num_shards);

// The comma-separated items of `list` (empty items dropped).
std::vector<std::string> SplitList(const std::string& list);

// --- Offline (offline_commands.cc, export_command.cc, verify_command.cc) ------

// Opens options.data_dir read-only without an identity check.
Status OpenOffline(const CtlOptions& options, std::unique_ptr<ShardStore>* store);
// The table called `name`, or UnknownTable.
StatusOr<TableSchema> FindOfflineTable(const ShardStore& store, std::string_view name);

// The stores of options.data_dir: one store, or (a comma-separated list) the
// shards of one job, ordered by shard id. Errors: a list whose identities do
// not form shards 0..n-1 of one n-shard job.
struct OfflineSet {
  std::vector<std::unique_ptr<ShardStore>> owned;
  std::vector<const ShardStore*> shards;  // index = shard id (one entry: a single store)
};
Status OpenOfflineSet(const CtlOptions& options, OfflineSet* set);
// The table called `name` on every shard; InvalidArgument if the shards
// disagree on its schema.
StatusOr<TableSchema> FindTableOnAll(const OfflineSet& set, std::string_view name);

Status OfflineTables(const CtlContext& ctx, const Args& args);
Status OfflineDescribe(const CtlContext& ctx, const Args& args);
Status OfflineGet(const CtlContext& ctx, const Args& args);
Status OfflineScan(const CtlContext& ctx, const Args& args);
Status OfflineStats(const CtlContext& ctx, const Args& args);
Status OfflineExport(const CtlContext& ctx, const Args& args);
// InvalidArgument unless --format is csv or npy and --out is set.
Status CheckExportFlags(const CtlOptions& options);
Status OfflineVerify(const CtlContext& ctx, const Args& args);
// import NAME FILE.npy|FILE.csv (import_command.cc): opens the stores for
// writing (so no paced or app may hold them).
Status OfflineImport(const CtlContext& ctx, const Args& args);

// --- The past (history_commands.cc) -------------------------------------------

// --at=CKPT[,CKPT...] or --at=CLOCK: sets options->data_dir to the checkpoint
// dirs to read (CLOCK: each --data_dir's checkpoint of that shard clock).
// NotFound / InvalidArgument naming what is missing.
Status ResolveAt(CtlOptions* options);
// diff CKPT_A CKPT_B TABLE: per-row change norms of TABLE from A to B, the
// --top rows that changed most.
Status OfflineDiff(const CtlContext& ctx, const Args& args);

// --- Checkpoints (checkpoint_commands.cc) -------------------------------------

Status CheckpointCreate(const CtlContext& ctx, const Args& args);
Status CheckpointList(const CtlContext& ctx, const Args& args);
Status CheckpointRestore(const CtlContext& ctx, const Args& args);

// --- Online (online_commands.cc) -----------------------------------------------

Status OnlineTables(const CtlContext& ctx, const Args& args);
Status OnlineDescribe(const CtlContext& ctx, const Args& args);
Status OnlineGet(const CtlContext& ctx, const Args& args);
// scan online: rows [--start, --start + --limit), --limit required.
Status OnlineScan(const CtlContext& ctx, const Args& args);
Status OnlineStats(const CtlContext& ctx, const Args& args);
Status OnlineExport(const CtlContext& ctx, const Args& args);

}  // namespace pace::ctl

#endif  // PACE_TOOLS_CTL_COMMANDS_H_
