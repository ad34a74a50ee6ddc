// SortByTableAndRow: the order in which an Apply's rows go to the store.
#ifndef PACE_SERVER_SORT_BY_ROW_H_
#define PACE_SERVER_SORT_BY_ROW_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace pace {

// A row of a batch: its key and its index in the batch.
struct RowSortKey {
  uint32_t table;
  uint32_t index;
  uint64_t row;
};

// Sorts keys by (table, row), keeping their order among equal keys (a
// least-significant-digit radix sort, 8 bits a pass). Only the bytes that
// differ between keys take a pass: the rows of a model-scale clock (235k
// ids below 2^20, two tables) take four, several times faster than
// std::sort, which took ~25 ms a clock on the shard's service thread.
inline void SortByTableAndRow(std::vector<RowSortKey>* keys) {
  uint64_t row_or = 0, row_and = ~uint64_t{0};
  uint32_t table_or = 0, table_and = ~uint32_t{0};
  for (const RowSortKey& k : *keys) {
    row_or |= k.row;
    row_and &= k.row;
    table_or |= k.table;
    table_and &= k.table;
  }
  const uint64_t row_varies = row_or ^ row_and;  // bits not the same in all keys
  const uint32_t table_varies = table_or ^ table_and;
  std::vector<RowSortKey> out(keys->size());
  auto pass = [&](auto digit) {
    size_t start[257] = {};
    for (const RowSortKey& k : *keys) ++start[digit(k) + 1];
    for (size_t d = 1; d < 257; ++d) start[d] += start[d - 1];
    for (const RowSortKey& k : *keys) out[start[digit(k)]++] = k;
    keys->swap(out);
  };
  for (int b = 0; b < 64; b += 8) {
    if (((row_varies >> b) & 0xff) == 0) continue;
    pass([b](const RowSortKey& k) { return static_cast<size_t>((k.row >> b) & 0xff); });
  }
  for (int b = 0; b < 32; b += 8) {
    if (((table_varies >> b) & 0xff) == 0) continue;
    pass([b](const RowSortKey& k) { return static_cast<size_t>((k.table >> b) & 0xff); });
  }
}

}  // namespace pace

#endif  // PACE_SERVER_SORT_BY_ROW_H_
