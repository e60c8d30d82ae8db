#include "core/sampler.h"

#include <cstring>

namespace tcm {

// Our own log and exp, accurate to ~1e-7 relative, so the library needs no libm (loading
// it costs a C program ~350 KiB of RSS for two functions).
static constexpr double kLn2 = 0.6931471805599453;

static double Log(double x) {  // REQUIRES x > 0, finite
  uint64_t bits;
  memcpy(&bits, &x, sizeof(bits));
  int e = static_cast<int>((bits >> 52) & 0x7ff) - 1023;
  bits = (bits & ((uint64_t{1} << 52) - 1)) | (uint64_t{1023} << 52);  // mantissa in [1, 2)
  double m;
  memcpy(&m, &bits, sizeof(m));
  if (m > 1.4142135623730951) {  // keep m near 1 for fast convergence
    m *= 0.5;
    ++e;
  }
  // ln(m) = 2 atanh(t), t = (m-1)/(m+1), |t| <= 0.172
  const double t = (m - 1) / (m + 1), t2 = t * t;
  double sum = 0, term = t;
  for (int k = 1; k <= 13; k += 2) {
    sum += term / k;
    term *= t2;
  }
  return 2 * sum + e * kLn2;
}

static double Exp(double x) {
  if (x < -700) return 0;
  if (x > 700) x = 700;
  // e^x = 2^k * e^r, r = x - k ln2 in [0, ln2)
  double kf = x / kLn2;
  int k = static_cast<int>(kf);
  if (kf < k) --k;
  const double r = x - k * kLn2;
  double sum = 1, term = 1;
  for (int i = 1; i <= 14; ++i) {
    term *= r / i;
    sum += term;
  }
  uint64_t bits;
  memcpy(&bits, &sum, sizeof(bits));
  const int64_t exp_field = static_cast<int64_t>((bits >> 52) & 0x7ff) + k;
  if (exp_field <= 0) return 0;
  bits = (bits & ~(uint64_t{0x7ff} << 52)) | (static_cast<uint64_t>(exp_field) << 52);
  memcpy(&sum, &bits, sizeof(sum));
  return sum;
}

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
  double gap = -Log(u) * static_cast<double>(mean);
  if (gap < 1.0) return 1;
  if (gap > 9e18) return INT64_MAX / 2;
  return static_cast<int64_t>(gap);
}

double SampleWeight(size_t size, int64_t period) {
  if (period <= 0) return 1.0;
  double p = 1.0 - Exp(-static_cast<double>(size) / static_cast<double>(period));
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
