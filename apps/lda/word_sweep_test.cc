#include "apps/lda/word_sweep.h"

#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <vector>

#include "common/scoped_temp_dir.h"

namespace pace {
namespace lda {
namespace {

// 6 documents over 5 words, one of them empty.
Corpus SmallCorpus() {
  Corpus c;
  c.vocab_size = 5;
  c.docs = {{0, 1, 1}, {}, {4, 0}, {2, 2, 2, 3}, {1}, {0, 4, 3}};
  for (const auto& d : c.docs) c.num_tokens += d.size();
  return c;
}

LocalDocs DocsOf(const Corpus& c, const LdaParams& p, std::vector<uint32_t> ids) {
  LocalDocs docs;
  InitLocalDocs(c, std::move(ids), p, 7, &docs, [](uint32_t, int) {});
  return docs;
}

TEST(WordTokenIndexTest, GroupsAWindowsTokensByWord) {
  const Corpus c = SmallCorpus();
  LdaParams p;
  p.topics = 3;
  p.vocab = c.vocab_size;
  // Local order: corpus documents 3, 1 (empty), 5, 0.
  const LocalDocs docs = DocsOf(c, p, {3, 1, 5, 0});
  for (uint32_t t = 0; t < 4; ++t) EXPECT_EQ(DocOfToken(docs, t), 0u);
  EXPECT_EQ(DocOfToken(docs, 4), 2u);  // the empty document owns no token
  EXPECT_EQ(DocOfToken(docs, 7), 3u);
  WordTokenIndex index;
  // The window wraps: local documents 2, 3, 0.
  ASSERT_TRUE(index.Build(c, docs, 2, 3, p.vocab).ok());
  ASSERT_EQ(index.begin.size(), 6u);
  EXPECT_EQ(index.pos.size(), 10u);
  const std::vector<uint32_t> counts = {2, 2, 3, 2, 1};
  for (uint32_t w = 0; w < 5; ++w) {
    EXPECT_EQ(index.Count(w), counts[w]) << w;
    for (uint32_t e = index.begin[w]; e < index.begin[w + 1]; ++e) {
      const uint32_t t = index.pos[e];
      const size_t i = DocOfToken(docs, t);
      EXPECT_EQ(c.docs[docs.ids[i]][t - docs.offset[i]], w);
    }
  }
}

// The word-topic counts of `docs`' assignments (V x K).
std::vector<int32_t> Counts(const Corpus& c, const LocalDocs& docs, const LdaParams& p) {
  std::vector<int32_t> n(static_cast<size_t>(p.vocab) * p.topics, 0);
  for (size_t i = 0; i < docs.ids.size(); ++i) {
    const auto& doc = c.docs[docs.ids[i]];
    for (size_t j = 0; j < doc.size(); ++j) ++n[doc[j] * p.topics + docs.z[docs.offset[i] + j]];
  }
  return n;
}

// Init, then two sampling passes, then a replay, over 1000 words of 300
// topics (two blocks of rows, 1.2 MB of deltas a pass): the table's counts
// equal the assignments' after each, with each pass's open deltas leaving
// in parts (open-delta and unacked bounds of 1 MiB: parts of 512 KiB).
TEST(WordSweepTest, TheTableCountsTheAssignmentsAfterEveryPass) {
  Corpus c;
  c.vocab_size = 1000;
  for (uint32_t d = 0; d < 200; ++d) {
    c.docs.emplace_back();
    for (uint32_t j = 0; j < 50; ++j) c.docs.back().push_back((d * 7 + j * j) % c.vocab_size);
    c.num_tokens += 50;
  }
  LdaParams p;
  p.topics = 300;  // 1200-byte rows
  p.vocab = c.vocab_size;
  ScopedTempDir dir;
  ClientOptions o;
  o.data_dir = dir.path() + "/d";
  o.open_delta_mb = 1;
  o.unacked_mb = 1;
  std::unique_ptr<Client> client;
  ASSERT_TRUE(Client::Open(o, &client).ok());
  TableSchema s;
  s.name = "wt";
  s.type = ElementType::kI32;
  s.width = static_cast<uint32_t>(p.topics);
  s.consistency = Consistency::kBsp;
  Table wt;
  ASSERT_TRUE(client->CreateTable(s, &wt).ok());
  std::unique_ptr<Worker> worker;
  ASSERT_TRUE(client->RegisterWorker(&worker).ok());

  std::vector<uint32_t> ids(c.docs.size());
  std::iota(ids.begin(), ids.end(), 0u);
  LocalDocs docs = DocsOf(c, p, ids);
  WordTokenIndex index;
  ASSERT_TRUE(index.Build(c, docs, 0, docs.ids.size(), p.vocab).ok());
  WordSweep sweep(p, wt);
  ASSERT_LT(sweep.block_rows(), p.vocab);  // more than one block
  std::vector<int32_t> nk(p.topics, 0);
  for (int32_t k : docs.z) ++nk[k];
  auto expect_exact = [&](const char* after) {
    ASSERT_TRUE(worker->Clock().ok());
    ASSERT_TRUE(client->Flush().ok());
    ASSERT_TRUE(worker->GlobalBarrier().ok());
    std::vector<uint64_t> rows(p.vocab);
    std::iota(rows.begin(), rows.end(), 0u);
    std::vector<int32_t> stored(rows.size() * p.topics);
    ASSERT_TRUE(worker->GetRows(wt, rows, stored.data()).ok());
    EXPECT_EQ(stored, Counts(c, docs, p)) << after;
  };

  WordSweep::Pass init;
  init.mode = WordSweep::Mode::kInit;
  ASSERT_TRUE(sweep.Run(worker.get(), index, &docs, init).ok());
  expect_exact("init");
  for (uint64_t clock = 1; clock <= 2; ++clock) {
    apps::Rng rng(clock);
    double ll = 0;
    WordSweep::Pass pass;
    pass.rng = &rng;
    pass.nk = nk.data();
    pass.ll_word = &ll;
    const std::vector<int32_t> before = docs.z;
    ASSERT_TRUE(sweep.Run(worker.get(), index, &docs, pass).ok());
    EXPECT_NE(docs.z, before);
    EXPECT_LT(ll, 0);
    expect_exact("sampling");
  }
  EXPECT_GE(client->Stats().batches_sent, 6u) << "the passes should leave in parts";
  // Replay: moves every token to a recorded assignment.
  std::vector<int32_t> next(docs.z.size());
  for (size_t t = 0; t < next.size(); ++t) next[t] = static_cast<int32_t>(t % p.topics);
  WordSweep::Pass replay;
  replay.mode = WordSweep::Mode::kReplay;
  replay.next = &next;
  replay.nk = nk.data();
  ASSERT_TRUE(sweep.Run(worker.get(), index, &docs, replay).ok());
  EXPECT_EQ(docs.z, next);
  expect_exact("replay");
  std::vector<int32_t> totals(p.topics, 0);
  for (int32_t k : docs.z) ++totals[k];
  EXPECT_EQ(nk, totals);
}

}  // namespace
}  // namespace lda
}  // namespace pace
