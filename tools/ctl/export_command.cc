// pacectl export NAME --format=csv|npy --out=FILE (offline; online: online_commands.cc).
#include "common/row.h"
#include "tools/ctl/commands.h"
#include "tools/ctl/export.h"
#include "tools/ctl/json_writer.h"
#include "tools/ctl/output_file.h"

namespace pace::ctl {

namespace {

// NAME.npy -> NAME.rows.npy; other names get ".rows.npy" appended.
std::string RowIdsPath(const std::string& out) {
  const std::string ext = ".npy";
  if (out.size() > ext.size() && out.compare(out.size() - ext.size(), ext.size(), ext) == 0) {
    return out.substr(0, out.size() - ext.size()) + ".rows.npy";
  }
  return out + ".rows.npy";
}

}  // namespace

Status CheckExportFlags(const CtlOptions& options) {
  const std::string& format = options.format;
  if (format != "csv" && format != "npy") {
    return Status::InvalidArgument(format.empty()
                                       ? "export needs --format=csv or --format=npy"
                                       : "--format must be csv or npy, got '" + format + "'");
  }
  if (options.out.empty()) {
    return Status::InvalidArgument("export needs --out=FILE (or --out=- for stdout)");
  }
  return Status::OK();
}

Status OfflineExport(const CtlContext& ctx, const Args& args) {
  RETURN_IF_ERROR(CheckExportFlags(ctx.options));
  const std::string& format = ctx.options.format;
  if (ctx.options.rows != 0 && format != "npy") {
    return Status::InvalidArgument("--rows applies only to --format=npy (offline)");
  }
  OfflineSet set;
  RETURN_IF_ERROR(OpenOfflineSet(ctx.options, &set));
  ASSIGN_OR_RETURN(TableSchema t, FindTableOnAll(set, args[0]));
  MergedPlan plan;
  RETURN_IF_ERROR(
      PlanMerged(set.shards, t, format == "npy", ctx.options.rows, ctx.options.max_rows, &plan));
  const ShardIdentity& id = set.shards[0]->identity();
  if (set.shards.size() == 1 && id.num_shards > 1) {
    ctx.err << "pacectl: warning: this store is shard " << id.shard_id << " of " << id.num_shards
            << "; rows held by other shards are missing"
            << (format == "npy" ? " (their initializer values in the array)" : "")
            << "; pass every shard's dir (--data_dir=A,B) for the whole table\n";
  }
  if (plan.foreign_rows != 0) {
    ctx.err << "pacectl: warning: skipped " << plan.foreign_rows
            << " row(s) stored on a shard that does not own them (pacectl verify names them)\n";
  }
  auto file = std::make_unique<OutputFile>(ctx.options.out, &ctx.out);
  RETURN_IF_ERROR(file->Open());
  std::unique_ptr<OutputFile> rows_file;
  const std::string rows_path = RowIdsPath(ctx.options.out);
  if (format == "npy" && ctx.options.out != "-") {
    rows_file = std::make_unique<OutputFile>(rows_path, &ctx.out);
    RETURN_IF_ERROR(rows_file->Open());
  }
  ExportStats stats;
  // npy: the whole size is known (header + rows x row bytes); csv: bytes so far.
  const uint64_t npy_bytes =
      format == "npy" ? NpyHeader(t.type, plan.rows, t.width).size() +
                            plan.rows * static_cast<uint64_t>(RowFormat::Of(t).dense_bytes())
                      : 0;
  ExportProgress progress(&ctx.err, "export " + t.name, npy_bytes);
  ProgressStream out(file->stream(), &progress);
  if (format == "npy") {
    RETURN_IF_ERROR(WriteMergedNpy(set.shards, t, plan, &out, &stats));
    if (rows_file != nullptr) RETURN_IF_ERROR(WriteRowIdsNpy(plan.written, rows_file->stream()));
  } else {
    RETURN_IF_ERROR(WriteMergedCsv(set.shards, t, plan, &out, &stats));
  }
  out.flush();
  if (!out.good()) return Status::IOError("export: write to --out=" + ctx.options.out + " failed");
  progress.Finish(out.bytes());
  RETURN_IF_ERROR(file->Commit());
  if (rows_file != nullptr) RETURN_IF_ERROR(rows_file->Commit());
  if (ctx.options.out == "-") return Status::OK();
  if (ctx.options.json) {
    JsonWriter w(&ctx.out);
    w.BeginObject();
    w.Member("table", t.name);
    w.Member("format", format);
    w.Member("out", ctx.options.out);
    w.MemberUint("written_rows", stats.written_rows);
    w.MemberUint("shards", set.shards.size());
    if (format == "npy") {
      w.Member("rows_out", rows_path);
      w.Member("dtype", NpyDescr(t.type));
      w.Key("shape");
      w.BeginArray();
      w.Uint(stats.array_rows);
      w.Uint(t.width);
      w.EndArray();
    } else {
      w.MemberUint("lines", stats.lines);
    }
    w.EndObject();
    ctx.out << '\n';
    return Status::OK();
  }
  ctx.out << "exported table " << t.name << " to " << ctx.options.out << ": ";
  if (format == "npy") {
    ctx.out << "npy " << NpyDescr(t.type) << " shape (" << stats.array_rows << ", " << t.width
            << "), " << stats.written_rows << " written rows (ids in " << rows_path << ")";
    if (set.shards.size() > 1) ctx.out << ", merged from " << set.shards.size() << " shards";
    ctx.out << "\n";
  } else {
    ctx.out << "csv, " << stats.lines << " lines from " << stats.written_rows << " written rows\n";
  }
  return Status::OK();
}

}  // namespace pace::ctl
