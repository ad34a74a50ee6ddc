#include "common/store_damage.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

namespace pace {

namespace {

bool IsPathChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '/' || c == '.' || c == '_' ||
         c == '-' || c == '+' || c == '~';
}

// The path-like token of `text` around [at, at + n): extended left and right
// over path characters.
std::string TokenAround(std::string_view text, size_t at, size_t n) {
  size_t b = at, e = at + n;
  while (b > 0 && IsPathChar(text[b - 1])) --b;
  while (e < text.size() && IsPathChar(text[e])) ++e;
  while (e > b && text[e - 1] == '.') --e;  // "000010.sst." at a sentence end
  return std::string(text.substr(b, e - b));
}

// The first "<digits><suffix>" in `text` (e.g. "000010.sst"), as a token.
std::string FindNumbered(std::string_view text, std::string_view suffix) {
  for (size_t at = text.find(suffix); at != std::string_view::npos;
       at = text.find(suffix, at + 1)) {
    if (at == 0 || !std::isdigit(static_cast<unsigned char>(text[at - 1]))) continue;
    const size_t end = at + suffix.size();
    if (end < text.size() && std::isalnum(static_cast<unsigned char>(text[end]))) continue;
    return TokenAround(text, at, suffix.size());
  }
  return "";
}

// The write-ahead logs in `dir` ("<digits>.log"), as paths, sorted.
std::vector<std::string> WalFiles(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (!FindNumbered(name, ".log").empty() && name == FindNumbered(name, ".log")) {
      out.push_back(dir + "/" + name);
    }
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

DamagedFile FindDamagedFile(std::string_view message) {
  DamagedFile d;
  if (std::string p = FindNumbered(message, ".sst"); !p.empty()) {
    return {DamagedFileKind::kSst, p};
  }
  if (size_t at = message.find("CLOCKLOG-"); at != std::string_view::npos) {
    return {DamagedFileKind::kClockLog, TokenAround(message, at, 9)};
  }
  if (size_t at = message.find("MANIFEST-"); at != std::string_view::npos) {
    return {DamagedFileKind::kManifest, TokenAround(message, at, 9)};
  }
  if (size_t at = message.find("CURRENT"); at != std::string_view::npos) {
    return {DamagedFileKind::kCurrent, TokenAround(message, at, 7)};
  }
  if (std::string p = FindNumbered(message, ".log"); !p.empty()) {
    return {DamagedFileKind::kWal, p};
  }
  return d;
}

std::string DamagedFileKindName(DamagedFileKind kind) {
  switch (kind) {
    case DamagedFileKind::kSst:
      return "an SST file";
    case DamagedFileKind::kClockLog:
      return "the clock log";
    case DamagedFileKind::kManifest:
      return "the MANIFEST";
    case DamagedFileKind::kCurrent:
      return "CURRENT";
    case DamagedFileKind::kWal:
      return "a write-ahead log";
    case DamagedFileKind::kUnknown:
      break;
  }
  return "a file";
}

Status ClassifyStoreCorruption(const std::string& dir, const Status& s) {
  if (s.code() != StatusCode::kCorruption) return s;
  if (s.message().find("pacectl --data_dir=") != std::string::npos) return s;  // classified already
  DamagedFile d = FindDamagedFile(s.message());
  // RocksDB's text for a damaged write-ahead log names no file: the store's
  // logs are the candidates (usually one).
  std::vector<std::string> wals;
  if (d.kind == DamagedFileKind::kUnknown &&
      s.message().find("a write-ahead log is damaged") != std::string::npos) {
    wals = WalFiles(dir);
    if (!wals.empty()) d.kind = DamagedFileKind::kWal;
  }
  // RocksDB glues some file names to the word before them ("to be an
  // sstable/dir/000010.sst"): the store's files are all directly in `dir`.
  if (const size_t slash = d.path.rfind('/'); slash != std::string::npos && !dir.empty()) {
    d.path = dir + d.path.substr(slash);
  } else if (!d.path.empty() && !dir.empty()) {
    d.path = dir + "/" + d.path;
  }
  std::string lead;
  switch (d.kind) {
    case DamagedFileKind::kSst:
      lead = "SST file " + d.path + " is damaged (its size or a block checksum does not match): ";
      break;
    case DamagedFileKind::kClockLog:
      lead = "the clock log " + d.path + " is damaged: ";
      break;
    case DamagedFileKind::kManifest:
      lead = "the MANIFEST " + d.path + " is damaged: ";
      break;
    case DamagedFileKind::kCurrent:
      lead = s.message().rfind("CURRENT (", 0) == 0 ? "" : "CURRENT (" + d.path + ") is damaged: ";
      break;
    case DamagedFileKind::kWal:
      if (wals.size() == 1) {
        lead = "write-ahead log " + wals[0] + " is damaged: ";
      } else if (!wals.empty()) {
        lead = "one of the write-ahead logs";
        for (size_t i = 0; i < wals.size(); ++i) lead += (i == 0 ? " " : ", ") + wals[i];
        lead += " is damaged: ";
      }
      break;  // a log RocksDB named: the store's own text names it
    case DamagedFileKind::kUnknown:
      return s;
  }
  // The store's own text for a failed open blames a write-ahead log whenever
  // one exists; the file RocksDB named is the truth.
  std::string detail = s.message();
  const size_t wal_claim = detail.find("): a write-ahead log is damaged");
  if (wal_claim != std::string::npos && d.kind != DamagedFileKind::kWal) {
    const size_t open = detail.rfind(" (", wal_claim);
    if (open != std::string::npos) detail = detail.substr(open + 2, wal_claim - open - 2);
  }
  // Its own way out, if it gave one, is replaced by the one below.
  for (const char* way_out : {". Way out:", "; restore the last checkpoint"}) {
    if (const size_t at = detail.find(way_out); at != std::string::npos) detail.resize(at);
  }
  while (!detail.empty() &&
         (detail.back() == '\n' || detail.back() == ' ' || detail.back() == '.')) {
    detail.pop_back();
  }
  return Status::Corruption(lead + detail + ". Check the whole store with `pacectl --data_dir=" +
                            dir + " verify`; way out: restore the newest good checkpoint into a " +
                            "new data dir (pacectl checkpoint list " + dir +
                            "/checkpoints; pacectl checkpoint restore CKPT --data_dir=NEWDIR)");
}

Status CheckCurrentFile(const std::string& dir) {
  const std::string current = dir + "/CURRENT";
  std::string text;
  for (int attempt = 0; attempt < 4; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20 << attempt));
    std::ifstream in(current, std::ios::binary);
    if (!in) return Status::OK();  // no store (or unreadable): the open says which
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
    bool well_formed =
        text.size() > 10 && text.compare(0, 9, "MANIFEST-") == 0 && text.back() == '\n';
    for (size_t i = 9; well_formed && i + 1 < text.size(); ++i) {
      well_formed = std::isdigit(static_cast<unsigned char>(text[i])) != 0;
    }
    if (!well_formed) {
      std::string shown = text.substr(0, 40);
      while (!shown.empty() && (shown.back() == '\n' || shown.back() == '\r')) shown.pop_back();
      for (char& c : shown) {
        if (!std::isprint(static_cast<unsigned char>(c))) c = '?';
      }
      return Status::Corruption("CURRENT (" + current + ") is damaged: it holds '" + shown +
                                "', not the name of a MANIFEST file");
    }
    text.pop_back();
    if (Exists(dir + "/" + text)) return Status::OK();
  }
  return Status::Corruption("CURRENT (" + current + ") is damaged: it names " + text +
                            ", which does not exist");
}

}  // namespace pace
