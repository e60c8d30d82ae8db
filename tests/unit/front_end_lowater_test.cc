// The per-thread front end's fast paths (api/allocation.h) keep each list's low-water mark,
// which the design's garbage collection halves (ThreadCache::Scavenge): free's push records
// the length it finds, malloc's pop only counts (ThreadCache::LowWater). The unit tests of
// thread_cache_test.cc drive the lists through copies of the fast paths; this one calls the
// real ones (tcm::Allocate / tcm::Deallocate, linked from tcmalloc_core beside glibc's
// malloc) on the calling thread's real cache, so a fast path that stops keeping the mark
// fails here: the collection would then give back objects the thread went on using.
// CTest runs it with TCMALLOC_PER_CPU_CACHES=0 and the samplers off (a sampled block does
// not come from the list); where the per-CPU front end is active anyway it skips.
#include <gtest/gtest.h>

#include <vector>

#include "api/allocation.h"
#include "api/globals.h"

namespace tcm {
namespace {

constexpr size_t kSize = 64;

class FrontEndLowWater : public ::testing::Test {
 protected:
  void SetUp() override {
    void* warm = Allocate(kSize);  // the first call builds the thread's cache
    ASSERT_NE(warm, nullptr);
    Deallocate(warm);
    if (g_cpu_cache.active()) GTEST_SKIP() << "per-CPU front end active: run with TCMALLOC_PER_CPU_CACHES=0";
    tc_ = tls_cache;
    ASSERT_NE(tc_, &g_empty_cache);
    cl_ = SizeMap::ClassIndex(kSize);
    // Grow the list: allocate and free a few hundred blocks until it holds 200 or more.
    for (int round = 0; round < 64 && tc_->Length(cl_) < 200; ++round) {
      std::vector<void*> blocks;
      for (int i = 0; i < 300; ++i) blocks.push_back(Allocate(kSize));
      for (void* p : blocks) Deallocate(p);
    }
    ASSERT_GE(tc_->Length(cl_), 200u);
    // A collection starts the interval: the mark is the length from here on.
    tc_->Scavenge();
    length_ = tc_->Length(cl_);
    ASSERT_GE(length_, 100u);
    ASSERT_LE(length_, tc_->max_lengths_[cl_]) << "the frees below must not overflow";
    ASSERT_EQ(tc_->LowWater(cl_), length_);
  }

  // n cache hits in a row (asserted: the list had the objects).
  std::vector<void*> Take(uint32_t n) {
    std::vector<void*> taken;
    for (uint32_t i = 0; i < n; ++i) taken.push_back(Allocate(kSize));
    EXPECT_EQ(tc_->Length(cl_), length_ - n);
    return taken;
  }

  ThreadCache* tc_ = nullptr;
  size_t cl_ = 0;
  uint32_t length_ = 0;
};

TEST_F(FrontEndLowWater, PopsAloneLeaveTheMarkAtTheLengthNow) {
  const uint32_t n = length_ * 3 / 4;
  std::vector<void*> taken = Take(n);
  EXPECT_EQ(tc_->LowWater(cl_), length_ - n);
  for (void* p : taken) Deallocate(p);
}

TEST_F(FrontEndLowWater, AListThatWentLowAndCameBackKeepsItsLowestLength) {
  const uint32_t n = length_ * 3 / 4;
  std::vector<void*> taken = Take(n);
  for (void* p : taken) Deallocate(p);  // fast-path pushes: the first one saw length_ - n
  ASSERT_EQ(tc_->Length(cl_), length_);
  EXPECT_EQ(tc_->LowWater(cl_), length_ - n);
  // The collection gives back half of the mark, not half of the list.
  tc_->Scavenge();
  EXPECT_EQ(tc_->Length(cl_), length_ - (length_ - n) / 2);
  EXPECT_EQ(tc_->LowWater(cl_), tc_->Length(cl_));  // and starts the next interval
}

TEST_F(FrontEndLowWater, TheLowestOfSeveralDipsCounts) {
  // Down by a quarter and back, down by a half and back, down by an eighth and back.
  for (uint32_t n : {length_ / 4, length_ / 2, length_ / 8}) {
    std::vector<void*> taken = Take(n);
    for (void* p : taken) Deallocate(p);
  }
  EXPECT_EQ(tc_->LowWater(cl_), length_ - length_ / 2);
}

TEST_F(FrontEndLowWater, AListThatRanEmptyHasMarkZero) {
  // Every object and one more: the last malloc misses and refills the list from the central
  // list (ThreadCache::FetchFromCentral), so the list was empty at that moment whatever its
  // length when the frees come back.
  std::vector<void*> taken;
  for (uint32_t i = 0; i <= length_; ++i) taken.push_back(Allocate(kSize));
  for (void* p : taken) Deallocate(p);
  EXPECT_GT(tc_->Length(cl_), 0u);
  EXPECT_EQ(tc_->LowWater(cl_), 0u);
}

// The room free's push takes (ThreadCache::spaces_): a free into a list at its maximum (or
// over it: PushSlow's shrink can leave one object more) goes to the slow path, which gives
// a batch back, instead of pushing on.
TEST_F(FrontEndLowWater, AFullListSendsTheFreeToTheSlowPath) {
  std::vector<void*> taken;
  for (uint32_t i = 0; i < length_ + 2 * tc_->max_lengths_[cl_]; ++i) taken.push_back(Allocate(kSize));
  int slow = 0;
  for (void* p : taken) {
    const uint32_t before = tc_->Length(cl_);
    const bool full = before >= tc_->max_lengths_[cl_];
    Deallocate(p);
    if (full) {
      ASSERT_LE(tc_->Length(cl_), before) << "a full list took a push on the fast path";
      ++slow;
    } else {
      ASSERT_EQ(tc_->Length(cl_), before + 1);
    }
  }
  EXPECT_GT(slow, 0);
}

// A maximum lowered under the list by more than one leaves the room below 0: the next free
// goes to the slow path too.
TEST_F(FrontEndLowWater, AMaximumLoweredUnderTheListIsRespected) {
  tc_->list(cl_).set_max_length(length_ - 10);
  ASSERT_EQ(tc_->Length(cl_), length_);
  void* p = Allocate(kSize);
  Deallocate(p);
  EXPECT_LT(tc_->Length(cl_), length_) << "the free pushed onto a list over its maximum";
}

}  // namespace
}  // namespace tcm
