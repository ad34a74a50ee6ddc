#include "apps/mf/ratings_data.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <memory>
#include <queue>
#include <utility>

#include "apps/shared/partition.h"
#include "apps/shared/random.h"
#include "apps/shared/text_input.h"

namespace pace {
namespace mf {

using apps::Excerpt;
using apps::ParseDouble;
using apps::ParseU64;
using apps::Trim;

Status ParseRatingsFileFormat(std::string_view name, RatingsFileFormat* out) {
  for (RatingsFileFormat f :
       {RatingsFileFormat::kAuto, RatingsFileFormat::kCsv, RatingsFileFormat::kTsv,
        RatingsFileFormat::kDat, RatingsFileFormat::kPlain}) {
    if (RatingsFileFormatName(f) == name) {
      *out = f;
      return Status::OK();
    }
  }
  return Status::InvalidArgument("unknown ratings format '" + std::string(name) +
                                 "' (expected auto|csv|tsv|dat|plain)");
}

std::string_view RatingsFileFormatName(RatingsFileFormat f) {
  switch (f) {
    case RatingsFileFormat::kAuto:
      return "auto";
    case RatingsFileFormat::kCsv:
      return "csv";
    case RatingsFileFormat::kTsv:
      return "tsv";
    case RatingsFileFormat::kDat:
      return "dat";
    case RatingsFileFormat::kPlain:
      return "plain";
  }
  return "?";
}

RatingsFileFormat DetectRatingsFormat(std::string_view line) {
  if (line.find("::") != std::string_view::npos) return RatingsFileFormat::kDat;
  if (line.find(',') != std::string_view::npos) return RatingsFileFormat::kCsv;
  if (line.find('\t') != std::string_view::npos) return RatingsFileFormat::kTsv;
  return RatingsFileFormat::kPlain;
}

namespace {

const char* Expected(RatingsFileFormat f) {
  switch (f) {
    case RatingsFileFormat::kCsv:
      return "'user,item,rating[,timestamp]'";
    case RatingsFileFormat::kTsv:
      return "'user<TAB>item<TAB>rating[<TAB>timestamp]'";
    case RatingsFileFormat::kDat:
      return "'user::item::rating[::timestamp]'";
    default:
      return "'user item rating'";
  }
}

void Split(std::string_view line, RatingsFileFormat format, std::vector<std::string_view>* fields) {
  switch (format) {
    case RatingsFileFormat::kCsv:
      apps::SplitOn(line, ",", fields);
      break;
    case RatingsFileFormat::kTsv:
      apps::SplitOn(line, "\t", fields);
      break;
    case RatingsFileFormat::kDat:
      apps::SplitOn(line, "::", fields);
      break;
    default:
      apps::SplitWhitespace(line, fields);
      break;
  }
}

// "userId,movieId,rating,timestamp": a rating field that is no number at
// all (not even "inf" or "nan", which are bad ratings, not words), and a
// user field that is not an unsigned integer ("1,2,x" is a bad line).
bool IsHeader(std::string_view line, RatingsFileFormat format) {
  std::vector<std::string_view> fields;
  Split(line, format, &fields);
  uint64_t id;
  return fields.size() >= 3 && !apps::IsNumberText(fields[2]) && !ParseU64(fields[0], &id);
}

// A numeric id column: an unsigned integer without a leading zero.
bool ParseNumericId(std::string_view text, const char* what, uint64_t* out, std::string* why) {
  if (ParseU64(text, out) && (text.size() == 1 || text[0] != '0')) return true;
  *why = std::string("bad ") + what + " " + Excerpt(text) +
         (ParseU64(text, out) ? " (a leading zero, which a number would lose"
                              : " (expected an unsigned integer") +
         "; --string_ids reads ids as text)";
  return false;
}

}  // namespace

uint64_t IdNames::Intern(Column c, std::string_view text) {
  auto [it, added] = index_[c].emplace(std::string(text), names_[c].size());
  if (added) names_[c].push_back(it->first);
  return it->second;
}

bool IdNames::Raw(Column c, std::string_view text, uint64_t* raw, bool* switched,
                  std::string* why) {
  *switched = false;
  const char* what = c == kUser ? "user id " : "item id ";
  if (text.empty()) {
    *why = std::string("empty ") + what;
    return false;
  }
  if (text.size() > kMaxIdBytes) {
    *why = what + Excerpt(text) + " is longer than " + std::to_string(kMaxIdBytes) + " bytes";
    return false;
  }
  if (!strings_[c]) {
    if ((text.size() == 1 || text[0] != '0') && ParseU64(text, raw)) return true;
    // Interned only after the ids read before it (Renumber), to keep the
    // order of first appearance: the caller parses the line again.
    strings_[c] = true;
    *switched = true;
    *raw = 0;
    return true;
  }
  *raw = Intern(c, text);
  return true;
}

void IdNames::Renumber(Column c, std::vector<RawRating>* ratings) {
  for (RawRating& r : *ratings) {
    uint64_t& id = c == kUser ? r.user : r.item;
    id = Intern(c, std::to_string(id));
  }
}

std::string IdNames::Text(Column c, uint64_t raw) const {
  return strings_[c] && raw < names_[c].size() ? names_[c][raw] : std::to_string(raw);
}

bool ParseRatingLine(std::string_view line, RatingsFileFormat format, RawRating* out,
                     std::string* why, IdNames* names, bool* switched) {
  // Kept across lines: a vector per line was three allocations (1, 2, 4
  // fields) for each of a file's millions of lines.
  thread_local std::vector<std::string_view> fields;
  Split(line, format, &fields);
  if (fields.size() < 3 || fields.size() > 4) {
    *why = "expected " + std::string(Expected(format)) + ", got " + std::to_string(fields.size()) +
           " field(s) in " + Excerpt(line);
    return false;
  }
  if (names != nullptr) {
    bool user_switched = false, item_switched = false;
    if (!names->Raw(IdNames::kUser, fields[0], &out->user, &user_switched, why) ||
        !names->Raw(IdNames::kItem, fields[1], &out->item, &item_switched, why)) {
      return false;
    }
    if (switched != nullptr) *switched = user_switched || item_switched;
  } else if (!ParseNumericId(fields[0], "user id", &out->user, why) ||
             !ParseNumericId(fields[1], "item id", &out->item, why)) {
    return false;
  }
  double v;
  if (!ParseDouble(fields[2], &v) || std::abs(v) > std::numeric_limits<float>::max()) {
    *why = "bad rating " + Excerpt(fields[2]) + " (expected a finite number)";
    return false;
  }
  out->value = static_cast<float>(v);
  return true;
}

namespace {

constexpr size_t kRatingsBeforeReserve = 4096;
// The shortest line a rating can have ("1 1 1\n").
constexpr uint64_t kMinRatingLineBytes = 6;

// Room for the rest of the file's ratings, from the bytes per rating so far
// (plus an eighth; at most one per kMinRatingLineBytes): growing by doubling
// copied each rating ~twice more and faulted every new buffer in (the dense
// shape's 9.9M ratings: ~1 s of a 6 s start). Room past what is used is
// address space, never touched; where even that cannot be had, the vector
// grows as before.
void ReserveForFile(const apps::LineReader& reader, size_t ratings, std::vector<RawRating>* out) {
  if (reader.file_bytes() == 0 || ratings == 0) return;
  const uint64_t left = reader.file_bytes() - std::min(reader.file_bytes(), reader.bytes_read());
  const double per_rating = static_cast<double>(reader.bytes_read()) / static_cast<double>(ratings);
  const uint64_t more = std::min<uint64_t>(static_cast<uint64_t>(left / per_rating * 1.125) + 1024,
                                           left / kMinRatingLineBytes + 1);
  try {
    out->reserve(out->size() + more);
  } catch (const std::exception&) {
    // No room reserved: push_back grows the vector as it needs.
  }
}

}  // namespace

Status ReadRatings(const std::string& path, const RatingsReadOptions& options,
                   std::vector<RawRating>* out, RatingsReadInfo* info) {
  std::unique_ptr<apps::LineReader> reader;
  RETURN_IF_ERROR(apps::LineReader::Open(path, &reader));
  apps::BadLinePolicy policy(options.skip_bad_lines);
  RatingsFileFormat format = options.format;
  IdNames* const names = options.names;
  bool first = true;
  const size_t before = out->size();
  std::string why;
  std::string_view line;
  while (reader->Next(&line)) {
    std::string_view t = Trim(line);
    if (t.empty() || t[0] == '#') continue;
    if (first) {
      first = false;
      if (format == RatingsFileFormat::kAuto) format = DetectRatingsFormat(t);
      // MovieLens ratings.csv starts with a header line.
      if (IsHeader(t, format)) continue;
    }
    RawRating r;
    const bool user_strings = names != nullptr && names->strings(IdNames::kUser);
    const bool item_strings = names != nullptr && names->strings(IdNames::kItem);
    bool switched = false;
    if (!ParseRatingLine(t, format, &r, &why, names, &switched)) {
      RETURN_IF_ERROR(policy.Handle(Status::InvalidArgument(reader->Where() + ": " + why)));
      continue;
    }
    if (switched) {
      // The ids read so far were numbers: they become strings too, then this
      // line's.
      if (!user_strings && names->strings(IdNames::kUser)) names->Renumber(IdNames::kUser, out);
      if (!item_strings && names->strings(IdNames::kItem)) names->Renumber(IdNames::kItem, out);
      ParseRatingLine(t, format, &r, &why, names, &switched);
    }
    out->push_back(r);
    // Once, when the count reaches it (ratings are added one at a time).
    if (out->size() - before == kRatingsBeforeReserve) {
      ReserveForFile(*reader, kRatingsBeforeReserve, out);
    }
  }
  RETURN_IF_ERROR(reader->status());
  if (info != nullptr) {
    info->format = format;
    info->lines = reader->line_number();
    info->skipped = policy.skipped();
    info->first_skipped = policy.first_error();
  }
  if (out->size() == before) {
    return Status::InvalidArgument(
        "'" + path + "' holds no ratings" +
        (policy.skipped() ? " (every line was bad; first: " + policy.first_error() + ")"
                          : std::string()));
  }
  return Status::OK();
}

size_t IdMap::SlotOf(uint64_t raw) const {
  // A 64-bit mix (MurmurHash3's finalizer): ids are often small and dense,
  // which the identity would put in consecutive slots.
  uint64_t h = raw;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  const size_t mask = slots_.size() - 1;
  size_t at = static_cast<size_t>(h) & mask;
  while (slots_[at] != kUnknown && raw_[slots_[at]] != raw) at = (at + 1) & mask;
  return at;
}

void IdMap::Rehash(size_t capacity) {
  std::vector<uint32_t>().swap(slots_);
  slots_.assign(capacity, kUnknown);
  for (uint32_t i = 0; i < raw_.size(); ++i) slots_[SlotOf(raw_[i])] = i;
}

uint32_t IdMap::Intern(uint64_t raw) {
  if (slots_.empty()) Rehash(64);
  uint32_t& slot = slots_[SlotOf(raw)];
  if (slot != kUnknown) return slot;
  const uint32_t index = static_cast<uint32_t>(raw_.size());
  slot = index;
  raw_.push_back(raw);
  if (2 * raw_.size() > slots_.size()) Rehash(2 * slots_.size());
  return index;
}

uint32_t IdMap::Find(uint64_t raw) const { return slots_.empty() ? kUnknown : slots_[SlotOf(raw)]; }

void IdMap::Compact() { raw_.shrink_to_fit(); }

uint64_t IdMap::MemoryBytes() const {
  return slots_.capacity() * sizeof(uint32_t) + raw_.capacity() * sizeof(uint64_t);
}

Status BuildDataset(const std::vector<RawRating>& train_raw, const std::vector<RawRating>& test_raw,
                    double test_fraction, uint64_t seed, MfDataset* out) {
  if (!(test_fraction >= 0 && test_fraction < 1)) {
    return Status::InvalidArgument("--test_fraction must be in [0, 1)");
  }
  *out = MfDataset();
  const bool split = test_raw.empty() && test_fraction > 0;
  std::vector<const RawRating*> held_out;
  out->train.reserve(train_raw.size());
  double sum = 0;
  float lo = std::numeric_limits<float>::max(), hi = std::numeric_limits<float>::lowest();
  for (size_t i = 0; i < train_raw.size(); ++i) {
    const RawRating& r = train_raw[i];
    if (split && apps::HashUniform(seed, 0x7E57, i) < test_fraction) {
      held_out.push_back(&r);
      continue;
    }
    out->train.push_back(Rating{out->users.Intern(r.user), out->items.Intern(r.item), r.value});
    sum += r.value;
    lo = std::min(lo, r.value);
    hi = std::max(hi, r.value);
  }
  if (out->train.empty()) return Status::InvalidArgument("no training ratings");
  {
    // SGD visits the ratings in this order, so it reads them sequentially
    // (random access into the ratings costs a cache miss per rating).
    const std::vector<uint32_t> order = apps::ShuffledOrder(out->train.size(), seed);
    std::vector<Rating> shuffled;
    shuffled.reserve(out->train.size());
    for (uint32_t i : order) shuffled.push_back(out->train[i]);
    out->train.swap(shuffled);
  }
  out->mean = sum / static_cast<double>(out->train.size());
  out->min_rating = lo;
  out->max_rating = hi;
  auto add_test = [out](const RawRating& r) {
    Rating t{out->users.Find(r.user), out->items.Find(r.item), r.value};
    if (t.user == IdMap::kUnknown || t.item == IdMap::kUnknown) ++out->test_unknown;
    out->test.push_back(t);
  };
  if (split) {
    for (const RawRating* r : held_out) add_test(*r);
  } else {
    for (const RawRating& r : test_raw) add_test(r);
  }
  out->users.Compact();
  out->items.Compact();
  return Status::OK();
}

std::vector<size_t> PartitionByUser(uint32_t num_parts, MfDataset* data) {
  std::vector<size_t> offsets(num_parts + 1, 0);
  std::vector<Rating>& train = data->train;
  if (num_parts <= 1) {
    offsets.back() = train.size();
    return offsets;
  }
  std::vector<uint64_t> count(data->users.size(), 0);
  for (const Rating& r : train) ++count[r.user];
  std::vector<uint32_t> users(count.size());
  for (uint32_t u = 0; u < users.size(); ++u) users[u] = u;
  std::stable_sort(users.begin(), users.end(),
                   [&](uint32_t a, uint32_t b) { return count[a] > count[b]; });
  // Min-heap of (load, part): the least loaded part, lower part on ties.
  using Load = std::pair<uint64_t, uint32_t>;
  std::priority_queue<Load, std::vector<Load>, std::greater<Load>> parts;
  for (uint32_t p = 0; p < num_parts; ++p) parts.push({0, p});
  std::vector<uint32_t> part_of(count.size(), 0);
  for (uint32_t u : users) {
    Load least = parts.top();
    parts.pop();
    part_of[u] = least.second;
    parts.push({least.first + count[u], least.second});
  }
  // Counting sort by part, stable.
  std::vector<size_t> next(num_parts + 1, 0);
  for (const Rating& r : train) ++next[part_of[r.user] + 1];
  for (uint32_t p = 0; p < num_parts; ++p) next[p + 1] += next[p];
  offsets = next;
  std::vector<Rating> sorted(train.size());
  for (const Rating& r : train) sorted[next[part_of[r.user]]++] = r;
  train.swap(sorted);
  return offsets;
}

void CountPartRows(const MfDataset& data, const std::vector<size_t>& offsets,
                   std::vector<size_t>* users, std::vector<size_t>* items) {
  const size_t parts = offsets.empty() ? 0 : offsets.size() - 1;
  users->assign(parts, 0);
  items->assign(parts, 0);
  // The part that last counted each id: one pass, no clearing between parts.
  std::vector<uint32_t> user_seen(data.users.size(), UINT32_MAX);
  std::vector<uint32_t> item_seen(data.items.size(), UINT32_MAX);
  for (uint32_t p = 0; p < parts; ++p) {
    for (size_t k = offsets[p]; k < offsets[p + 1]; ++k) {
      const Rating& r = data.train[k];
      if (r.user != IdMap::kUnknown && user_seen[r.user] != p) {
        user_seen[r.user] = p;
        ++(*users)[p];
      }
      if (r.item != IdMap::kUnknown && item_seen[r.item] != p) {
        item_seen[r.item] = p;
        ++(*items)[p];
      }
    }
  }
}

}  // namespace mf
}  // namespace pace
