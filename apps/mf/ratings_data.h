// Ratings input for pace_mf: the file formats it reads, the mapping of raw
// (non-contiguous) user and item ids to dense indices, and the train/test
// dataset.
//
// Formats (chosen by flag or detected from the first data line):
//   csv    MovieLens ratings.csv: "userId,movieId,rating,timestamp" with an
//          optional header line
//   tsv    MovieLens u.data: "user<TAB>item<TAB>rating<TAB>timestamp"
//   dat    MovieLens ratings.dat: "user::item::rating::timestamp"
//   plain  "user item rating" separated by spaces or tabs
// The timestamp is optional in every format and ignored. Ids are unsigned
// 64-bit integers without a leading zero, or, with RatingsReadOptions::names
// (pace_mf --string_ids), strings (IdNames); ratings are finite numbers. A
// first line whose rating field is no number at all (not even inf or nan)
// and whose user field is not an unsigned integer is a header. Blank lines
// and lines starting with '#' are skipped. A bad line (a negative or
// non-numeric id without names, a rating of inf or nan, ...) is an
// InvalidArgument error naming "file:line", or is skipped and counted when
// skip_bad_lines is set.
//
// Thread-compatible.
#ifndef PACE_APPS_MF_RATINGS_DATA_H_
#define PACE_APPS_MF_RATINGS_DATA_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/status.h"

namespace pace {
namespace mf {

enum class RatingsFileFormat { kAuto, kCsv, kTsv, kDat, kPlain };

// "auto", "csv", "tsv", "dat", "plain".
Status ParseRatingsFileFormat(std::string_view name, RatingsFileFormat* out);
std::string_view RatingsFileFormatName(RatingsFileFormat f);

// The format of a file whose first non-blank, non-comment line is `line`.
RatingsFileFormat DetectRatingsFormat(std::string_view line);

struct RawRating {
  uint64_t user = 0;
  uint64_t item = 0;
  float value = 0;
};

// String ids (Amazon-style "A3SGXH7AUHU8GW"). A column (users or items)
// holds numbers until its first id that is not one, or that has a leading
// zero ("0132793040", which a number would lose); from then on every id of
// the column is a string, interned in order of first appearance (ids read
// as numbers before are renumbered with their decimal text), and a
// RawRating holds the string's index. So the same files always give the
// same ids. Thread-compatible.
class IdNames {
 public:
  enum Column { kUser = 0, kItem = 1 };
  static constexpr size_t kMaxIdBytes = 64;

  // The raw id of `text` in column c. False (and *why set) for an empty id or
  // one longer than kMaxIdBytes. *switched: this id turned the column to
  // strings and was not interned yet: the caller renumbers what it read
  // before (Renumber), then asks again.
  bool Raw(Column c, std::string_view text, uint64_t* raw, bool* switched, std::string* why);
  bool strings(Column c) const { return strings_[c]; }
  // After a switch: maps the numeric ids of column c in `ratings` to strings.
  void Renumber(Column c, std::vector<RawRating>* ratings);
  // The id as text: its string, or its number.
  std::string Text(Column c, uint64_t raw) const;
  // The strings of column c, by raw id (empty while it holds numbers).
  const std::vector<std::string>& names(Column c) const { return names_[c]; }

 private:
  uint64_t Intern(Column c, std::string_view text);

  bool strings_[2] = {false, false};
  std::vector<std::string> names_[2];
  std::unordered_map<std::string, uint64_t> index_[2];
};

// Parses one data line of a known format (not kAuto). On failure returns
// false and sets *why to a short reason. Without `names`, ids must be numbers.
bool ParseRatingLine(std::string_view line, RatingsFileFormat format, RawRating* out,
                     std::string* why, IdNames* names = nullptr, bool* switched = nullptr);

struct RatingsReadOptions {
  // Default: detect from the first data line.
  RatingsFileFormat format = RatingsFileFormat::kAuto;
  // Skip (and count) bad lines instead of failing. Default: false.
  bool skip_bad_lines = false;
  // Where string ids are interned (shared by the train and test files);
  // nullptr: ids must be numbers. Default: nullptr.
  IdNames* names = nullptr;
};

struct RatingsReadInfo {
  RatingsFileFormat format = RatingsFileFormat::kAuto;  // the format used
  uint64_t lines = 0;                                   // lines read
  uint64_t skipped = 0;                                 // bad lines skipped
  std::string first_skipped;                            // the first one's error
};

// Appends the file's ratings to *out. Errors: NotFound/IOError for the file,
// InvalidArgument "path:line: ..." for a bad line (unless skipped) or a file
// without any rating.
Status ReadRatings(const std::string& path, const RatingsReadOptions& options,
                   std::vector<RawRating>* out, RatingsReadInfo* info);

// Maps raw ids to dense indices 0..n-1 in order of first appearance, so every
// process that reads the same file builds the same map.
class IdMap {
 public:
  static constexpr uint32_t kUnknown = 0xFFFFFFFFu;
  uint32_t Intern(uint64_t raw);
  // kUnknown if `raw` was never interned.
  uint32_t Find(uint64_t raw) const;
  uint64_t raw(uint32_t index) const { return raw_[index]; }
  const std::vector<uint64_t>& raw_ids() const { return raw_; }
  uint32_t size() const { return static_cast<uint32_t>(raw_.size()); }
  // Frees the room kept for more ids (BuildDataset calls it at its end);
  // Find and Intern work as before.
  void Compact();
  // Bytes held by the map (the hash index and the raw ids).
  uint64_t MemoryBytes() const;

 private:
  // The hash index: open addressing with linear probing in a power-of-two
  // table at most half full, each slot an index into raw_ (kUnknown: empty).
  // Reading a model-scale file interns two ids per rating (~20M for the
  // dense shape); std::unordered_map took a division, two dependent cache
  // misses (bucket, node) and ~48 bytes per id, ~1.6 s of a 4.5 s start. A
  // slot of 4 bytes keeps the index below the map's memory (8-16 bytes per
  // id besides raw_), which the start's peak RSS feels (under --memory_mb
  // the step-size search takes its share after it).
  size_t SlotOf(uint64_t raw) const;  // its slot, or the empty one it would take
  void Rehash(size_t capacity);
  std::vector<uint32_t> slots_;
  std::vector<uint64_t> raw_;
};

// A rating with dense indices. In a test set, user or item may be
// IdMap::kUnknown (not in the training data).
struct Rating {
  uint32_t user = 0;
  uint32_t item = 0;
  float value = 0;
};

struct MfDataset {
  IdMap users;
  IdMap items;
  // The text of string ids (IdMap raw ids index it in a string column).
  IdNames names;
  std::vector<Rating> train;
  std::vector<Rating> test;
  // Over the training ratings.
  double mean = 0;
  float min_rating = 0;
  float max_rating = 0;
  // Test ratings whose user or item does not appear in training.
  uint64_t test_unknown = 0;
};

// Builds the dataset. The training ratings are stored in a random order that
// is a pure function of `seed` (SGD visits them in that order and workers take
// contiguous parts of it). With a non-empty `test_raw`, that is the test set;
// otherwise, if test_fraction > 0, rating i of `train_raw` goes to the test
// set iff a hash of (seed, i) falls below test_fraction (the same split in
// every process). Ids are interned from the training ratings only.
// InvalidArgument if no training rating remains or test_fraction is outside
// [0, 1).
Status BuildDataset(const std::vector<RawRating>& train_raw, const std::vector<RawRating>& test_raw,
                    double test_fraction, uint64_t seed, MfDataset* out);

// Splits the training ratings into `num_parts` parts, one per worker of the
// job: all ratings of a user go to one part, so a user's factors are updated
// by one worker only (never stale for it, and no two workers contend for
// them). Users are dealt greedily, most ratings first (ties: lower index), to
// the part with the fewest ratings so far (ties: lower part), which balances
// parts to within one user's ratings. Reorders data->train stably (each part
// contiguous, the existing order kept within it) and returns the num_parts + 1
// part offsets. Deterministic, so every process computes the same parts; with
// one part the order is unchanged. REQUIRES: num_parts >= 1.
std::vector<size_t> PartitionByUser(uint32_t num_parts, MfDataset* data);

// The distinct users and items of the training ratings of each part
// [offsets[p], offsets[p + 1]) (as PartitionByUser returns), into
// (*users)[p] and (*items)[p]. Unknown ids (IdMap::kUnknown) are not counted.
void CountPartRows(const MfDataset& data, const std::vector<size_t>& offsets,
                   std::vector<size_t>* users, std::vector<size_t>* items);

}  // namespace mf
}  // namespace pace

#endif  // PACE_APPS_MF_RATINGS_DATA_H_
