// The hardening's batch check on batches shaped as a per-CPU cache hands them in, alone in
// a loop, for instruction counts under callgrind: valgrind has no rseq, so through the
// library it only ever sees per-thread mode (chains, not arrays).
//
//   valgrind --tool=callgrind build/tests/unit/batch_check_cost SIZE ROUNDS SHAPE VECTOR
//
// SIZE: a size class's bytes (64); ROUNDS: batches checked (20000); SHAPE: 0 blocks in
// rising address order, 1 falling (the vector step's first group meets the turn), 2 three
// runs from three spans in an order that changes every round (a long falling run from each
// of two spans and four rising blocks from a third: what xmalloc's batches mostly look like,
// where the runs' comparison at the end is a third of the check); VECTOR:
// 1 four objects a step where the CPU has AVX2, 0 one at a time. Each round parks one batch
// (checked) and takes it back (not checked); callgrind_annotate shows CheckObjects and
// ContinuingObjects apart. CTest runs it briefly in both modes so it keeps working.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "core/central_freelist.h"
#include "core/size_classes.h"
#include "test_heap.h"

int main(int argc, char** argv) {
  using namespace tcm;
  const size_t size = argc > 1 ? strtoul(argv[1], nullptr, 10) : 64;
  const long rounds = argc > 2 ? strtol(argv[2], nullptr, 10) : 20000;
  const int shape = argc > 3 ? atoi(argv[3]) : 0;
  const bool vector = argc > 4 ? atoi(argv[4]) != 0 : true;
  if (size == 0 || size > kMaxSize || rounds < 0 || shape < 0 || shape > 2) {
    fprintf(stderr, "usage: batch_check_cost SIZE ROUNDS SHAPE VECTOR\n");
    return 2;
  }
  auto heap = testing::TestHeap::Make();
  auto list = std::make_unique<CentralFreeList>();
  const size_t cl = SizeMap::ClassIndex(size);
  list->Init(static_cast<uint8_t>(cl), &heap->heap, &heap->pagemap, /*checked=*/true, nullptr);
  list->SetVectorCheck(vector);
  const int batch = static_cast<int>(SizeMap::NumToMove(cl));
  std::vector<void*> objs(static_cast<size_t>(batch));
  if (shape == 2) {
    // Three spans' worth of blocks, sorted: segments of a batch come from different spans.
    const size_t per_span = SizeMap::ObjectsPerSpan(cl);
    std::vector<void*> pool(3 * per_span);
    for (size_t got = 0; got < pool.size();) {
      const int n = list->RemoveBatch(pool.data() + got, static_cast<int>(std::min<size_t>(batch, pool.size() - got)));
      if (n <= 0) return 1;
      got += static_cast<size_t>(n);
    }
    std::sort(pool.begin(), pool.end());
    const size_t tail = 4, each = (static_cast<size_t>(batch) - tail) / 2;
    if (batch < 8 || each > per_span) return 1;
    // Segment s: span s's first `len` blocks, falling (the third: rising).
    auto segment = [&](int s, size_t len, std::vector<void*>& out) {
      std::vector<void*> seg(pool.begin() + static_cast<long>(s * per_span),
                             pool.begin() + static_cast<long>(s * per_span + len));
      if (s < 2) std::reverse(seg.begin(), seg.end());
      out.insert(out.end(), seg.begin(), seg.end());
    };
    static const int kOrders[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    uint32_t rng = 12345;
    for (long r = 0; r < rounds; ++r) {
      rng = rng * 1103515245u + 12345u;
      std::vector<void*> b;
      for (int s : kOrders[(rng >> 16) % 6]) segment(s, s < 2 ? each : tail, b);
      list->InsertBatch(b.data(), static_cast<int>(b.size()));
      if (list->RemoveBatch(objs.data(), static_cast<int>(b.size())) != static_cast<int>(b.size())) return 1;
    }
  } else {
    if (list->RemoveBatch(objs.data(), batch) != batch) return 1;
    std::sort(objs.begin(), objs.end());
    if (shape == 1) std::reverse(objs.begin(), objs.end());
    for (long r = 0; r < rounds; ++r) {
      list->InsertBatch(objs.data(), batch);
      if (list->RemoveBatch(objs.data(), batch) != batch) return 1;
    }
  }
  printf("class %zu (%zu bytes), batch %d, %ld rounds, vector step %s: %zu objects passed four at a time, %zu of "
         "%zu batches filtered\n",
         cl, SizeMap::ClassSize(cl), batch, rounds, list->vector_check() ? "on" : "off",
         list->vector_checked_objects(), list->filtered_batches(), list->checked_batches());
  // With the vector step on, objects pass four at a time but for those the one-object
  // loop must take: a batch in address order, the first; in falling order, the first two
  // (the second sets the run's direction); three runs, two at each run's start and some
  // a run could not finish in groups of four (shape 2's batches of 32 pass 25.7 objects on
  // average, 24 when a group that fails is taken whole by the one-object loop). The smoke
  // tests' check that the step is in use and hands back to the vector step as soon as it
  // can.
  const size_t expected[3] = {static_cast<size_t>(batch - 1), static_cast<size_t>(batch - 2),
                              static_cast<size_t>(batch - 7)};
  if (list->vector_check() && list->vector_checked_objects() < expected[shape] * static_cast<size_t>(rounds)) {
    fprintf(stderr, "batch_check_cost: fewer objects passed four at a time than %zu a batch\n", expected[shape]);
    return 1;
  }
  return list->filtered_batches() == 0 ? 0 : 1;
}
