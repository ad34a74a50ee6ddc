#include "storage/row_merge.h"

#include <rocksdb/slice.h>

#include <deque>
#include <new>
#include <type_traits>

#include "common/element.h"

namespace pace {

namespace {

std::string_view View(const rocksdb::Slice& s) { return std::string_view(s.data(), s.size()); }
std::string_view View(std::string_view s) { return s; }

// Checks one tagged merge input against the format of the first one.
Status CheckInput(std::string_view v, std::string_view first, const RowFormat& f) {
  if (v.empty() || v[0] != first[0]) {
    return Status::Corruption("row values with different format tags cannot be merged");
  }
  if (f.kind == RowKind::kDense) {
    if (v.size() != first.size()) {
      return Status::Corruption("dense row values of " + std::to_string(v.size() - 1) + " and " +
                                std::to_string(first.size() - 1) + " bytes cannot be merged");
    }
    return Status::OK();
  }
  Status s = ValidateRow(f, v.substr(1));
  if (!s.ok()) return Status::Corruption("bad sparse row value: " + s.message());
  return Status::OK();
}

// Validates tagged `base` (may be null) and `ops`: all must carry the same
// valid tag and well-formed payloads of one size (dense). Sets *first to the
// input the sum starts from and *f to the format (width 0: implied).
template <typename Ops>
Status ValidateInputs(const std::string_view* base, const Ops& ops, std::string_view* first,
                      RowFormat* f) {
  if (base == nullptr && ops.size() == 0) return Status::Corruption("merge with no input");
  *first = base != nullptr ? *base : View(ops[0]);
  f->width = 0;  // Sparse: any column; dense: implied by the size.
  if (first->empty() || !ParseRowTag(static_cast<uint8_t>((*first)[0]), &f->kind, &f->type)) {
    return Status::Corruption("row value has no valid format tag");
  }
  if (f->kind == RowKind::kDense) {
    size_t payload = first->size() - 1;
    if (payload == 0 || payload % ElementSize(f->type) != 0) {
      return Status::Corruption("dense row value of " + std::to_string(payload) +
                                " bytes is not a whole number of elements");
    }
  } else if (base != nullptr) {
    RETURN_IF_ERROR(CheckInput(*first, *first, *f));
  }
  for (size_t i = 0; i < ops.size(); ++i) RETURN_IF_ERROR(CheckInput(View(ops[i]), *first, *f));
  return Status::OK();
}

// Sums tagged `base` (may be null) and `ops` into *out. Ops is a random-access
// container of rocksdb::Slice or std::string_view.
template <typename Ops>
Status MergeTagged(const std::string_view* base, const Ops& ops, std::string* out) {
  std::string_view first;
  RowFormat f;
  RETURN_IF_ERROR(ValidateInputs(base, ops, &first, &f));
  const size_t n = ops.size();
  const size_t start = base != nullptr ? 0 : 1;  // first operand not already in `first`
  if (f.kind == RowKind::kDense) {
    out->assign(first.data(), first.size());
    size_t elems = (first.size() - 1) / ElementSize(f.type);
    for (size_t i = start; i < n; ++i) {
      AddDenseElements(f.type, out->data() + 1, View(ops[i]).data() + 1, elems);
    }
    return Status::OK();
  }
  std::string acc(first.substr(1));
  // Inputs were validated above, so the unchecked sparse addition is safe.
  for (size_t i = start; i < n; ++i) AddRowUnchecked(f, &acc, View(ops[i]).substr(1));
  out->clear();
  out->reserve(1 + acc.size());
  out->push_back(first[0]);
  out->append(acc);
  return Status::OK();
}

class RowAddMergeOperator : public rocksdb::MergeOperator {
 public:
  const char* Name() const override { return kRowMergeOperatorName; }

  bool FullMergeV2(const MergeOperationInput& in, MergeOperationOutput* out) const override {
    try {
      std::string_view base_view;
      const std::string_view* base = nullptr;
      if (in.existing_value != nullptr) {
        base_view = View(*in.existing_value);
        base = &base_view;
      }
      if (base == nullptr && in.operand_list.size() == 1) {
        // A lone operand is already the sum: validate it and pass it through.
        std::string_view first;
        RowFormat f;
        if (!ValidateInputs(nullptr, in.operand_list, &first, &f).ok()) return false;
        out->existing_operand = in.operand_list[0];
        return true;
      }
      return MergeTagged(base, in.operand_list, &out->new_value).ok();
    } catch (...) {  // std::bad_alloc: never let an exception into RocksDB.
      return false;
    }
  }

  bool PartialMerge(const rocksdb::Slice& key, const rocksdb::Slice& left,
                    const rocksdb::Slice& right, std::string* new_value,
                    rocksdb::Logger* logger) const override {
    try {
      if (!MayMergePartially(View(left))) return false;
      std::vector<std::string_view> ops = {View(left), View(right)};
      return MergeTagged(nullptr, ops, new_value).ok();
    } catch (...) {
      return false;
    }
  }

  // Returning false keeps the operands unmerged; a corrupt one is then
  // reported by FullMergeV2 when the row is read or compacted.
  bool PartialMergeMulti(const rocksdb::Slice& key, const std::deque<rocksdb::Slice>& ops,
                         std::string* new_value, rocksdb::Logger* logger) const override {
    try {
      if (ops.empty() || !MayMergePartially(View(ops[0]))) return false;
      return MergeTagged(nullptr, ops, new_value).ok();
    } catch (...) {
      return false;
    }
  }

 private:
  // Float rows are never merged partially: a partial merge sums a run of
  // operands before the base is added, (b + (d1 + d2)), which may differ in
  // the last bits from b + d1 + d2 added in order. Declining keeps every
  // stored float sum the in-order sum of its deltas, whatever flushes and
  // compactions did, which the row cache relies on (docs/storage-format.md
  // section 6). Integer additions wrap and are associative: merged.
  static bool MayMergePartially(std::string_view first) {
    RowKind kind;
    ElementType type;
    return !first.empty() && ParseRowTag(static_cast<uint8_t>(first[0]), &kind, &type) &&
           IsIntegral(type);
  }
};

}  // namespace

uint8_t RowTag(RowKind kind, ElementType type) {
  return static_cast<uint8_t>((static_cast<uint8_t>(kind) << 4) | static_cast<uint8_t>(type));
}

bool ParseRowTag(uint8_t tag, RowKind* kind, ElementType* type) {
  uint8_t k = tag >> 4;
  uint8_t t = tag & 0x0f;
  if (k != static_cast<uint8_t>(RowKind::kDense) && k != static_cast<uint8_t>(RowKind::kSparse)) {
    return false;
  }
  if (t < static_cast<uint8_t>(ElementType::kF32) || t > static_cast<uint8_t>(ElementType::kI64)) {
    return false;
  }
  *kind = static_cast<RowKind>(k);
  *type = static_cast<ElementType>(t);
  return true;
}

Status ParseStoredRow(const RowFormat& f, std::string_view stored, std::string_view* payload) {
  if (stored.empty() || static_cast<uint8_t>(stored[0]) != RowTag(f)) {
    return Status::Corruption("stored row does not carry the table's format tag");
  }
  std::string_view p = stored.substr(1);
  Status s = ValidateRow(f, p);
  if (!s.ok()) return Status::Corruption("stored row is malformed: " + s.message());
  *payload = p;
  return Status::OK();
}

void NegateRow(const RowFormat& f, std::string* delta) {
  size_t first = 0, n = 0;
  if (f.kind == RowKind::kSparse) {
    n = SparseCount(*delta);
    first = 4 + 4 * n;  // count, columns, then the values
  } else {
    n = delta->size() / f.element_size();
  }
  char* values = delta->data() + first;
  VisitElementType(f.type, [values, n](auto zero) {
    using T = decltype(zero);
    for (size_t i = 0; i < n; ++i) {
      const T x = LoadElement<T>(values, i);
      if constexpr (std::is_integral_v<T>) {
        using U = std::make_unsigned_t<T>;
        StoreElement<T>(values, i, static_cast<T>(U{0} - static_cast<U>(x)));
      } else {
        StoreElement<T>(values, i, -x);
      }
    }
  });
}

void ComposeRow(const TableSchema& s, uint64_t row, const std::string_view* payload,
                std::string* out) {
  bool zero_init = s.init.kind == InitKind::kZeros || s.kind == RowKind::kSparse;
  if (payload != nullptr && zero_init) {
    out->assign(payload->data(), payload->size());
    return;
  }
  InitRow(s, row, out);
  if (payload != nullptr) {
    AddDenseElements(s.type, out->data(), payload->data(), s.width);
  }
}

Status MergeRowValues(const std::string_view* base, const std::vector<std::string_view>& operands,
                      std::string* out) {
  try {
    return MergeTagged(base, operands, out);
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted("out of memory merging row values");
  }
}

std::shared_ptr<rocksdb::MergeOperator> NewRowAddMergeOperator() {
  return std::make_shared<RowAddMergeOperator>();
}

}  // namespace pace
