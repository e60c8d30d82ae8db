// The hardening's batch check on batches shaped as a per-CPU cache hands them in, alone in
// a loop, for instruction counts under callgrind: valgrind has no rseq, so through the
// library it only ever sees per-thread mode (chains, not arrays).
//
//   valgrind --tool=callgrind build/tests/unit/batch_check_cost SIZE ROUNDS SHAPE VECTOR
//
// SIZE: a size class's bytes (64); ROUNDS: batches checked (20000); SHAPE: 0 blocks in
// rising address order, 1 falling (the vector step's first group meets the turn); VECTOR:
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
  if (size == 0 || size > kMaxSize || rounds < 0) {
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
  if (list->RemoveBatch(objs.data(), batch) != batch) return 1;
  std::sort(objs.begin(), objs.end());
  if (shape == 1) std::reverse(objs.begin(), objs.end());
  for (long r = 0; r < rounds; ++r) {
    list->InsertBatch(objs.data(), batch);
    if (list->RemoveBatch(objs.data(), batch) != batch) return 1;
  }
  printf("class %zu (%zu bytes), batch %d, %ld rounds, vector step %s: %zu objects passed four at a time, %zu of "
         "%zu batches filtered\n",
         cl, SizeMap::ClassSize(cl), batch, rounds, list->vector_check() ? "on" : "off",
         list->vector_checked_objects(), list->filtered_batches(), list->checked_batches());
  // With the vector step on, a batch in address order within one span passes four at a
  // time from its second object: the smoke test's check that the step is in use.
  if (list->vector_check() && rounds > 0 && shape == 0 && list->vector_checked_objects() == 0) return 1;
  return list->filtered_batches() == 0 ? 0 : 1;
}
