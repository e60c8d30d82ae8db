// SpanTree: the page heap's best-fit index of large free runs. Compared step by step with
// a brute-force model (a sorted multiset of (length, start)) under random inserts/removes,
// so any broken rotation or search shows up as a wrong answer, not as a later heap bug.
#include "core/span_tree.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <utility>
#include <vector>

namespace tcm {
namespace {

using Key = std::pair<uintptr_t, uintptr_t>;  // (length, start), the tree's order

Key KeyOf(const Span* s) { return {s->length.n, s->start.index}; }

// The model's answer for BestFit(n): smallest length >= n, lowest start among equals.
const Span* ModelBestFit(const std::set<Key>& model, const std::vector<Span>& spans,
                         uintptr_t n) {
  auto it = model.lower_bound({n, 0});
  if (it == model.end()) return nullptr;
  for (const Span& s : spans)
    if (KeyOf(&s) == *it) return &s;
  return nullptr;
}

std::vector<Key> InOrder(const SpanTree& tree) {
  std::vector<Key> out;
  tree.ForEach([&](Span* s) { out.push_back(KeyOf(s)); });
  return out;
}

TEST(SpanTree, EmptyTree) {
  SpanTree tree;
  EXPECT_TRUE(tree.empty());
  EXPECT_EQ(tree.size(), 0u);
  EXPECT_EQ(tree.BestFit(Length{1}), nullptr);
  EXPECT_TRUE(InOrder(tree).empty());
}

TEST(SpanTree, BestFitPrefersSmallestThenLowestAddress) {
  // Fixed example: equal lengths at different addresses, inserted high address first.
  std::vector<Span> spans(5);
  const uintptr_t layout[][2] = {{900, 200}, {100, 300}, {500, 200}, {300, 150}, {700, 128}};
  SpanTree tree;
  for (size_t i = 0; i < spans.size(); ++i) {
    spans[i].start = PageId{layout[i][0]};
    spans[i].length = Length{layout[i][1]};
    tree.Insert(&spans[i]);
    EXPECT_TRUE(spans[i].in_tree);
  }
  EXPECT_EQ(tree.BestFit(Length{1}), &spans[4]);    // 128 pages
  EXPECT_EQ(tree.BestFit(Length{140}), &spans[3]);  // 150 pages
  EXPECT_EQ(tree.BestFit(Length{151}), &spans[2]);  // 200 pages: start 500 beats 900
  EXPECT_EQ(tree.BestFit(Length{201}), &spans[1]);  // 300 pages
  EXPECT_EQ(tree.BestFit(Length{301}), nullptr);
  tree.Remove(&spans[2]);
  EXPECT_FALSE(spans[2].in_tree);
  EXPECT_EQ(tree.BestFit(Length{151}), &spans[0]);
  EXPECT_EQ(tree.size(), 4u);
}

TEST(SpanTree, MatchesBruteForceModelUnderRandomOperations) {
  std::mt19937_64 rng(12345);
  constexpr size_t kSpans = 2000;
  // Fake spans: disjoint page ranges (as in a real heap), lengths drawn from a small range
  // so many lengths repeat and the address tie-break is exercised.
  std::vector<Span> spans(kSpans);
  uintptr_t next_start = 1000;
  for (Span& s : spans) {
    s = Span{};
    s.length = Length{128 + rng() % 64};
    s.start = PageId{next_start};
    next_start += s.length.n + 1 + rng() % 4;
  }
  std::vector<size_t> order(kSpans);
  for (size_t i = 0; i < kSpans; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), rng);

  SpanTree tree;
  std::set<Key> model;  // keys are unique: starts are distinct
  std::vector<bool> in(kSpans, false);
  auto check = [&](const char* when) {
    ASSERT_EQ(tree.size(), model.size()) << when;
    ASSERT_EQ(tree.empty(), model.empty()) << when;
    for (uintptr_t n : {uintptr_t{1}, uintptr_t{128}, uintptr_t{130 + rng() % 60}, uintptr_t{191},
                        uintptr_t{192}}) {
      ASSERT_EQ(tree.BestFit(Length{n}), ModelBestFit(model, spans, n)) << when << " n=" << n;
    }
  };

  // Phase 1: insert everything, checking after each insert.
  for (size_t k = 0; k < kSpans; ++k) {
    Span* s = &spans[order[k]];
    tree.Insert(s);
    model.insert(KeyOf(s));
    in[order[k]] = true;
    if (k % 50 == 0) check("insert");
  }
  check("all inserted");
  // ForEach visits in (length, start) order, every span once.
  EXPECT_EQ(InOrder(tree), std::vector<Key>(model.begin(), model.end()));

  // Phase 2: random removes and re-inserts.
  for (int step = 0; step < 20000; ++step) {
    size_t i = rng() % kSpans;
    if (in[i]) {
      tree.Remove(&spans[i]);
      model.erase(KeyOf(&spans[i]));
    } else {
      tree.Insert(&spans[i]);
      model.insert(KeyOf(&spans[i]));
    }
    in[i] = !in[i];
    if (step % 200 == 0) check("mixed");
  }
  EXPECT_EQ(InOrder(tree), std::vector<Key>(model.begin(), model.end()));

  // Phase 3: drain.
  for (size_t i = 0; i < kSpans; ++i) {
    if (!in[i]) continue;
    tree.Remove(&spans[i]);
    model.erase(KeyOf(&spans[i]));
    if (i % 100 == 0) check("drain");
  }
  EXPECT_TRUE(tree.empty());
  EXPECT_EQ(tree.size(), 0u);
  EXPECT_EQ(tree.BestFit(Length{1}), nullptr);
}

}  // namespace
}  // namespace tcm
