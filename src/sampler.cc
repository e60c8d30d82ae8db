#include "sampler.h"

#include <cmath>

namespace tcm {

int64_t NextSampleGap(uint64_t* rng, int64_t mean) {
  // xorshift64*: cheap and good enough for spacing samples.
  uint64_t x = *rng;
  if (x == 0) x = 0x9E3779B97F4A7C15ull;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *rng = x;
  // 53 random bits -> u in (0, 1]; gap = -ln(u) * mean.
  double u = (static_cast<double>((x * 0x2545F4914F6CDD1Dull) >> 11) + 1.0) / 9007199254740992.0;
  double gap = -std::log(u) * static_cast<double>(mean);
  if (gap < 1.0) return 1;
  if (gap > 9e18) return INT64_MAX / 2;
  return static_cast<int64_t>(gap);
}

double SampleWeight(size_t size, int64_t period) {
  if (period <= 0) return 1.0;
  double p = 1.0 - std::exp(-static_cast<double>(size) / static_cast<double>(period));
  return p > 0 ? 1.0 / p : 1.0;
}

SampleRecord* SampleRegistry::Add(Arena* arena, size_t requested, size_t allocated, size_t alignment,
                                  int64_t period, void* const* pcs, int depth) {
  SpinLockHolder h(&lock_);
  SampleRecord* r = alloc_.New(arena);
  if (r == nullptr) return nullptr;
  r->requested = requested;
  r->allocated = allocated;
  r->alignment = alignment;
  r->period = period;
  r->depth = depth;
  for (int i = 0; i < depth; ++i) r->pcs[i] = pcs[i];
  r->prev = nullptr;
  r->next = head_;
  if (head_ != nullptr) head_->prev = r;
  head_ = r;
  ++live_;
  return r;
}

void SampleRegistry::Remove(SampleRecord* r) {
  SpinLockHolder h(&lock_);
  if (r->prev != nullptr) r->prev->next = r->next; else head_ = r->next;
  if (r->next != nullptr) r->next->prev = r->prev;
  --live_;
  alloc_.Delete(r);
}

size_t SampleRegistry::Snapshot(SampleRecord* out, size_t cap) {
  SpinLockHolder h(&lock_);
  size_t i = 0;
  for (SampleRecord* r = head_; r != nullptr && i < cap; r = r->next) out[i++] = *r;
  return live_;
}

}  // namespace tcm
