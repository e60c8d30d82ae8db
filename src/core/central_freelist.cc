#include "core/central_freelist.h"

#include <type_traits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "base/log.h"
#include "platform/os.h"
#include "platform/rseq.h"
#include "core/freelist_link.h"
#include "core/size_classes.h"

namespace tcm {

// Free objects are linked through freelist_link.h's encoded words: chain links in the
// batches that come and go, span links inside spans.

static constexpr const char* kIntoTransfer = "free() (batch from a thread cache into the transfer cache)";
static constexpr const char* kIntoSpans = "free() (objects returning to their spans)";

static inline bool TestBit(const uint64_t* bits, size_t i) { return (bits[i >> 6] >> (i & 63)) & 1; }

// The batch check's common case, four objects a step: how many objects from objs[0] on
// continue what the one-object loop of CheckObjects has seen up to objs[-1] (which is
// read), changing none of its state. Each object lies within `limit` bytes of `base` (the
// span in use), starts a block there (the 32-bit block-start test: limit is at most 64
// KiB), and steps on from the object before it in the run's direction (falling: 0 rising,
// all ones falling) by at most `jump` bytes. The one-object loop takes the first object
// that does not. ~20 instructions a group against ~28 an object: that loop was most of the
// check's cost in a producer-consumer program whose every object is freed remotely
// (xmalloc).
#if defined(__x86_64__)
namespace {
struct GroupTest {
  __m256i span_base, biased_limit, magic, below_magic, direction, biased_jump;
};
}  // namespace

// The four lanes' verdicts: lane i all ones when objs[i] continues (see below).
__attribute__((target("avx2"), always_inline)) static inline __m256i GroupVerdicts(const GroupTest& t,
                                                                                   void* const* objs) {
  // Unsigned 64-bit order by the signed compare, both sides with the top bit flipped.
  const __m256i top_bit = _mm256_set1_epi64x(INT64_MIN);
  const __m256i addr = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(objs));
  const __m256i prev = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(objs - 1));
  const __m256i offset = _mm256_sub_epi64(addr, t.span_base);
  const __m256i in_span = _mm256_cmpgt_epi64(t.biased_limit, _mm256_xor_si256(offset, top_bit));
  // In a lane whose offset is in the span its upper half is zero, and so is its product.
  const __m256i product = _mm256_mullo_epi32(offset, t.magic);
  const __m256i starts = _mm256_cmpeq_epi32(_mm256_min_epu32(product, t.below_magic), product);
  // The step in the run's direction, minus one, is below the longest step a run takes
  // (unsigned, so a step back or none is not): top bit flipped by adding 2^63 - 1.
  const __m256i step = _mm256_xor_si256(_mm256_sub_epi64(addr, prev), t.direction);
  const __m256i onward =
      _mm256_cmpgt_epi64(t.biased_jump, _mm256_add_epi64(step, _mm256_set1_epi64x(INT64_MAX)));
  return _mm256_and_si256(_mm256_and_si256(in_span, starts), onward);
}

// How many of the group's first objects continue, from its verdicts: 4 for all.
__attribute__((target("avx2"), always_inline)) static inline int LeadingContinuing(__m256i verdicts) {
  if (_mm256_testc_si256(verdicts, _mm256_set1_epi64x(-1))) return 4;
  // By 32-bit halves: the block-start test decides the low half of a lane only.
  return __builtin_ctz(~static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(verdicts)))) / 2;
}

__attribute__((target("avx2"))) static int ContinuingObjects(void* const* objs, int n, uintptr_t base, uint32_t limit,
                                                             uint32_t magic32, uintptr_t falling, uint32_t jump) {
  const GroupTest t{_mm256_set1_epi64x(static_cast<int64_t>(base)),
                    _mm256_set1_epi64x(static_cast<int64_t>(limit) ^ INT64_MIN),
                    _mm256_set1_epi32(static_cast<int32_t>(magic32)),
                    _mm256_set1_epi32(static_cast<int32_t>(magic32 - 1)),
                    _mm256_set1_epi64x(static_cast<int64_t>(falling)),
                    _mm256_set1_epi64x(static_cast<int64_t>(jump) ^ INT64_MIN)};
  // The count ends at the first object that does not continue (a run's or a span's
  // first, mostly), where the one-object loop takes over.
  int k = 0;
  for (; k + 4 <= n; k += 4) {
    const int passed = LeadingContinuing(GroupVerdicts(t, objs + k));
    if (passed < 4) return k + passed;
  }
  // One to three left: the last four, overlapping objects already passed (a pass is a
  // property of an object and the one before it, so passing twice changes nothing, and
  // the first that does not continue is at k or later).
  if (k < n && n >= 4) return n - 4 + LeadingContinuing(GroupVerdicts(t, objs + n - 4));
  return k;
}

static bool CpuHasAvx2() {
  __builtin_cpu_init();  // malloc may run before libgcc's constructor has
  return __builtin_cpu_supports("avx2");
}
#else
static int ContinuingObjects(void* const*, int, uintptr_t, uint32_t, uint32_t, uintptr_t, uint32_t) { return 0; }
static bool CpuHasAvx2() { return false; }
#endif

int CentralShardsFor(int cpus) {
  int shards = 1;
  while (shards * 2 <= cpus && shards * 2 <= kMaxCentralShards) shards *= 2;
  return shards;
}

static constinit CentralSetUp g_set_up = nullptr;

void SetCentralSetUp(CentralSetUp set_up) { __atomic_store_n(&g_set_up, set_up, __ATOMIC_RELEASE); }

static constinit ShardClassHook g_shard_class = nullptr;
void SetShardClassHook(ShardClassHook hook) { __atomic_store_n(&g_shard_class, hook, __ATOMIC_RELEASE); }

static constinit HandoffClock g_handoff_clock = nullptr;
void SetHandoffClock(HandoffClock clock) { __atomic_store_n(&g_handoff_clock, clock, __ATOMIC_RELEASE); }
static uint64_t HandoffNow() {
  const HandoffClock clock = __atomic_load_n(&g_handoff_clock, __ATOMIC_ACQUIRE);
  return clock != nullptr ? clock() : os::MonotonicCoarseNs();
}

void CentralFreeList::WatchHandoffs(int shards) {
  shard_mask_.store(shards - 1, std::memory_order_relaxed);
  handoffs_mark_.store(handoffs(), std::memory_order_relaxed);
  handoffs_since_.store(HandoffNow(), std::memory_order_relaxed);
  watch_handoffs_.store(true, std::memory_order_relaxed);
}

void CentralFreeList::NoteCallerWatched() {
  const int cpu = os::RseqCurrentCpu();
  if (cpu < 0) return;
  const int shard = cpu & shard_mask_.load(std::memory_order_relaxed);
  if (shard == last_shard_.load(std::memory_order_relaxed)) return;
  last_shard_.store(shard, std::memory_order_relaxed);
  const uint32_t count = handoffs_.load(std::memory_order_relaxed) + 1;
  handoffs_.store(count, std::memory_order_relaxed);
  if (count - handoffs_mark_.load(std::memory_order_relaxed) >= kShardAfterHandoffs) HandoffsReached(count);
}

void CentralFreeList::HandoffsReached(uint32_t count) {
  // Two threads may both get here: the hook is idempotent, and a window restarted twice
  // only delays a decision.
  const uint64_t now = HandoffNow();
  if (now - handoffs_since_.load(std::memory_order_relaxed) <= kShardWindowNs) {
    watch_handoffs_.store(false, std::memory_order_relaxed);
    const ShardClassHook hook = __atomic_load_n(&g_shard_class, __ATOMIC_ACQUIRE);
    if (hook != nullptr) hook(cl_);
    return;
  }
  // Too slow: a new window starts here.
  handoffs_mark_.store(count, std::memory_order_relaxed);
  handoffs_since_.store(now, std::memory_order_relaxed);
}

static constinit SurplusReleased g_surplus_released = nullptr;
void SetSurplusReleased(SurplusReleased hook) { __atomic_store_n(&g_surplus_released, hook, __ATOMIC_RELEASE); }
static constinit NewMemoryCarved g_new_memory_carved = nullptr;
void SetNewMemoryCarved(NewMemoryCarved hook) { __atomic_store_n(&g_new_memory_carved, hook, __ATOMIC_RELEASE); }

void CentralFreeList::SetUp() {
  const CentralSetUp set_up = __atomic_load_n(&g_set_up, __ATOMIC_ACQUIRE);
  if (set_up == nullptr) Crash("tcmalloc: a central list was used before it was set up");
  set_up(this);
}

// Every bitmap class's bitmap comes from one of the page heap's pools.
static constexpr size_t MaxBitmapWords() {
  size_t most = 0;
  for (size_t cl = 1; cl < kNumClasses; ++cl) {
    if (SizeMap::ClassSize(cl) < 16) continue;
    const size_t words = (SizeMap::ObjectsPerSpan(cl) + 63) / 64;
    if (words > most) most = words;
  }
  return most;
}
static_assert(MaxBitmapWords() <= PageHeap::kMaxBitmapWords);

void CentralFreeList::Init(uint8_t cl, PageHeap* heap, PageMap* pagemap, bool checked, ByteBudget* kept_spans) {
  size_ = static_cast<uint32_t>(SizeMap::ClassSize(cl));
  objects_per_span_ = static_cast<uint32_t>(SizeMap::ObjectsPerSpan(cl));
  heap_ = heap;
  pagemap_ = pagemap;
  checks_ = checked;
  vector_check_ = CpuHasAvx2();
  // A span's free objects are a bitmap, one bit per object: taking and returning them
  // touches no object, and there is no link in them to forge. The bits cost 1/(8 * size)
  // of the span: 0.8% for 16-byte objects, but 1.6% for 8-byte ones, which would break
  // the 2% space promise for them (overhead_test); that class keeps encoded lists.
  bitmap_words_ = size_ >= 16 ? (objects_per_span_ + 63) / 64 : 0;
  division_magic_ = SizeMap::kDivisionMagic[cl];
  // Spans of kKeptSpanMinObjects objects or more (every one-page span is one): a span of a
  // few big objects (32 KiB and up) would pin its pages for a single live object.
  kept_budget_ = bitmap_words_ != 0 && objects_per_span_ >= kKeptSpanMinObjects ? kept_spans : nullptr;
  const int batch = static_cast<int>(SizeMap::NumToMove(cl));
  TCM_CHECK(batch <= kMaxTransferBatch);  // the batch arrays on the stack below rely on it
  const size_t array_bytes = static_cast<size_t>(TransferCache::capacity_for(size_, batch)) * sizeof(void*);
  // Arena memory is fresh mmap: untouched until objects are parked (start-up RSS).
  transfer_.Init(size_, batch, heap->arena()->Alloc(array_bytes, 64));
  __atomic_store_n(&cl_, cl, __ATOMIC_RELEASE);  // ready()
}

void CentralFreeList::NotOfThisClass(void* obj, const char* call) const {
  Crash("%s: invalid pointer %p (not a block of size class %u, %u bytes: a foreign pointer or a corrupted "
        "free list)",
        call, obj, unsigned{cl_}, size_);
}

void CentralFreeList::NotABlockStart(void* obj, size_t offset, const char* call) const {
  // At a multiple of the size but not a block: the span's tail, where free()'s test passes.
  if (offset % size_ == 0)
    Crash("%s: invalid pointer %p (past the last block of its span, size class %u, %u bytes)", call, obj,
          unsigned{cl_}, size_);
  Crash("%s: invalid pointer %p (%zu bytes into a block of size class %u, %u bytes)", call, obj, offset % size_,
        unsigned{cl_}, size_);
}

void CentralFreeList::BadLink(const void* obj, const void* next) const {
  Crash("malloc(): corrupted free list of size class %u (%u bytes): the free block %p links to %p, not a "
        "block of its span (a write after free?)",
        unsigned{cl_}, size_, obj, next);
}

void CentralFreeList::ChainEndsEarly(const char* call, int n, int k, const void* last) const {
  Crash("%s: invalid pointer %p (a chain of %d blocks of size class %u ends after %d, here: a block freed twice "
        "(double free) or a corrupted free list)",
        call, last, n, unsigned{cl_}, k);
}

template <typename Source>
void CentralFreeList::DuplicateInBatch(Source src, int k, void* obj) const {
  exact_scans_.fetch_add(1, std::memory_order_relaxed);
  for (; k > 0; --k, src.advance())
    if (src.current() == obj)
      Crash("%s: invalid pointer %p (double free: the block is in the same batch twice; size class %u, %u bytes)",
            kIntoTransfer, obj, unsigned{cl_}, size_);
}

template <typename Source>
void CentralFreeList::ChainEndedEarly(Source first, int n, int k) const {
  for (int i = 1; i < k; ++i) first.advance();  // to the last object, whose link was null
  ChainEndsEarly(kIntoTransfer, n, k, k > 0 ? first.current() : nullptr);
}

uintptr_t CentralFreeList::BatchSpanBase(void* obj, bool one_page) const {
  const uintptr_t addr = reinterpret_cast<uintptr_t>(obj);
  if (TCM_UNLIKELY((addr >> kAddressBits) != 0 || pagemap_->ClassOf(addr) != cl_)) NotOfThisClass(obj, kIntoTransfer);
  return one_page ? addr & ~uintptr_t{kPageSize - 1} : pagemap_->GetSpan(PageId::FromPtr(obj))->start_addr();
}

bool CentralFreeList::VectorCheckAvailable() { return CpuHasAvx2(); }
void CentralFreeList::SetVectorCheck(bool on) { vector_check_ = on && CpuHasAvx2(); }

static inline uintptr_t Distance(uintptr_t a, uintptr_t b) { return a < b ? b - a : a - b; }

template <typename Source>
void CentralFreeList::CheckObjects(Source& src, int n, void** out) const {
  // Each pointer must be a block start of this class, and none may be in the batch twice.
  //
  // Block starts: the offset from the span's start (the page's, for classes of one-page
  // spans) must be below the last block's end and a multiple of the size (one
  // multiplication: SizeMap::StartsObject). The class map and the span are looked up
  // only when an offset leaves the span, which is also how a new page shows.
  //
  // Duplicates, without the filter where a batch allows it: a batch splits into runs of
  // strictly rising or strictly falling addresses within one span (in arrays, steps of
  // at most kRunJump blocks). A run cannot hold an address twice, and runs whose address
  // ranges do not overlap cannot share one. Batches mostly are such runs (objects come
  // back in the order a slab or a span handed them out, or its reverse, a few spans a
  // batch). The rest, and batches of more than kMaxRuns runs, go through the duplicate
  // filter (CheckObjectsFiltered), which also names the duplicate. Batches sent to the
  // filter (GetStats, "Batches checked"), per-CPU mode: binary trees (depth 18) under
  // 0.1%, xmalloc 64 B 0-4% (256 B: 30-80%, batches of 128 from all over the heap with
  // more than kMaxRuns runs, as before runs ended at jumps). Per-thread mode: binary trees
  // (depth 16) 7.6%, xmalloc 5%.
  //
  // Arrays go four objects a step where the CPU has AVX2 (ContinuingObjects): ~5
  // instructions an object against ~28 one at a time (and the filter's ~30).
  const Source first = src;
  Source at = src;  // in a local, as in CheckObjectsFiltered
  const bool one_page = SizeMap::ClassPages(cl_) == 1;
  const uint64_t magic = division_magic_;
  const size_t limit = size_t{objects_per_span_} * size_;  // offsets of block starts are below it
  // Arrays (per-CPU caches) only: runs end at jumps, and at a turn the step before it is
  // looked at. A thread cache's chain cannot look back, and its loop had no register left
  // for the longest step (two spills, ~3 instructions an object more: callgrind of
  // xmalloc +4%). Without them its batches go to the filter a little more often (xmalloc
  // 5% against 0%, binary trees 7.6% against 0%), which costs less than the spills did.
  constexpr bool kArray = std::is_same_v<Source, ArraySource>;
  // The longest step a run takes: farther, the next object starts a run of its own.
  const size_t jump = kRunJump * size_t{size_};
  if (n <= 0) return;
  // A racy count (a load and a store, no locked add): statistics, not worth a locked
  // instruction on a line several CPUs write.
  checked_batches_.store(checked_batches_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  if constexpr (std::is_same_v<Source, ChainSource>) {
    if (TCM_UNLIKELY(at.current() == nullptr)) ChainEndedEarly(first, n, 0);
  }
  // The span in use. The first object's is looked up before the loop: from any other
  // start, some pointer would be below limit from it and skip the class map.
  uintptr_t base = BatchSpanBase(at.current(), one_page);
  uintptr_t run_lo[kMaxRuns], run_hi[kMaxRuns];  // closed runs, as address ranges
  int runs = 0;
  // Records the run from `from` to `to` (either way up); false when there is no room.
  auto close_run = [&](uintptr_t from, uintptr_t to) __attribute__((always_inline)) {
    if (runs == kMaxRuns) return false;
    run_lo[runs] = from < to ? from : to;
    run_hi[runs] = from < to ? to : from;
    ++runs;
    return true;
  };
  // The current run's direction: 0 rising, all ones falling. A step that continues the
  // run is (step ^ falling) > 0 as a signed number; one against it, or none, is not.
  uintptr_t falling = 0;
  // A run's first object: prev is put just behind it, so that its own step passes.
  uintptr_t run_first = reinterpret_cast<uintptr_t>(at.current());
  uintptr_t prev = run_first - 1;
  // Arrays: from the second object on (the vector step reads the object before), groups
  // of four go through ContinuingObjects while they change nothing here; from the first
  // object that would, objects are taken one at a time until vector_at (below), where the
  // vector step is tried again.
  int vector_at = n;
  if constexpr (kArray) {
    if (vector_check_ && limit <= SizeMap::kSmallOffsetLimit) vector_at = 1;
  }
  for (int k = 0; k < n; ++k) {
    if constexpr (kArray) {
      if (k == vector_at) {
        const int passed = ContinuingObjects(at.objs, n - k, base, static_cast<uint32_t>(limit),
                                             SizeMap::kDivisionMagic32[cl_], falling, static_cast<uint32_t>(jump));
        at.objs += passed;
        k += passed;
        vector_checked_objects_.store(vector_checked_objects_.load(std::memory_order_relaxed) + passed,
                                      std::memory_order_relaxed);
        if (passed > 0) prev = reinterpret_cast<uintptr_t>(at.objs[-1]);
        if (k == n) break;
        // objs[k] does not continue. Groups may continue again once the one-object loop
        // has taken it and, when it starts a run, the next one, which sets the run's
        // direction (so one object when it is a run's second, guessed wrong). A step that
        // passed nothing else waits four objects: batches in no order would otherwise
        // try at every other one.
        vector_at = k + (run_first == prev ? 1 : passed > 0 ? 2 : 4);
      }
    }
    void* const obj = at.current();
    if constexpr (std::is_same_v<Source, ChainSource>) {
      if (TCM_UNLIKELY(obj == nullptr)) ChainEndedEarly(first, n, k);
    }
    const uintptr_t addr = reinterpret_cast<uintptr_t>(obj);
    size_t offset = addr - base;
    if (TCM_UNLIKELY(offset >= limit)) {
      // Another span (a new page), or past the span's last block, or not ours.
      const uintptr_t next_base = BatchSpanBase(obj, one_page);
      if (next_base != base) {
        base = next_base;
        offset = addr - base;
        // A new span starts a run.
        if (!close_run(run_first, prev)) return CheckObjectsFiltered(src, n, out);
        run_first = addr;
        prev = falling ? addr + 2 : addr - 1;
      }
      if (TCM_UNLIKELY(offset >= limit)) NotABlockStart(obj, offset, kIntoTransfer);
    }
    if (TCM_UNLIKELY(!SizeMap::StartsObject(magic, offset))) NotABlockStart(obj, offset, kIntoTransfer);
    const uintptr_t step = (addr - prev) ^ falling;  // 1 and up: onward in the run's direction
    if (TCM_UNLIKELY(kArray ? step - 1 >= jump : static_cast<intptr_t>(step) <= 0)) {
      if (addr == prev) DuplicateInBatch(first, k, obj);
      // A jump (onward, or from a run's first object), arrays only.
      const bool jumped = kArray && (static_cast<intptr_t>(step) > 0 || (run_first == prev && Distance(prev, addr) > jump));
      if (!jumped && run_first == prev) {
        falling = ~falling;  // a run's second object sets its direction
      } else if (!jumped && kArray && Distance(ObjectBeforePrev(at), prev) > Distance(prev, addr)) {
        // A turn after a longer step: that step's object belongs with what follows
        // (blocks 0-121, 127, 126-123 of a page). The run ends before it, and it starts
        // the next run with addr, in the new direction. (Arrays only: a chain cannot look
        // back, and keeping the object in a register cost its loop a spill.)
        if (!close_run(run_first, ObjectBeforePrev(at))) return CheckObjectsFiltered(src, n, out);
        run_first = prev;
        falling = ~falling;
      } else {
        // A jump, or a turn: the run ends at prev, the next starts here, guessing the run's
        // direction (pairs that zig-zag upwards: 1 0 3 2 5 4 are runs of two).
        if (!close_run(run_first, prev)) return CheckObjectsFiltered(src, n, out);
        run_first = addr;
      }
    }
    prev = addr;
    if constexpr (std::is_same_v<Source, ChainSource>) out[k] = obj;
    at.advance();  // only once obj is known to be one of ours (a chain's link is read here)
  }
  // Runs a batch splits into (the closed ones and the last): GetStats' batch-check line.
  std::atomic<size_t>& by_runs = batches_by_runs_[runs < kRunsCounted ? runs : kRunsCounted - 1];
  by_runs.store(by_runs.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  if (runs > 0) {
    if (!close_run(run_first, prev)) return CheckObjectsFiltered(src, n, out);
    if (runs <= 4) {
      // Disjoint ranges. Up to four runs (a batch mostly holds 2-4: a long run through a
      // page or two and a short one from elsewhere, in no fixed order) are compared
      // pairwise with no branch on the outcome: sorting them mispredicted its branches a
      // few times a batch. The missing ones as empty ranges, which overlap nothing.
      for (int a = runs; a < 4; ++a) {
        run_lo[a] = UINTPTR_MAX;
        run_hi[a] = 0;
      }
      const auto overlap = [&](int a, int b) __attribute__((always_inline)) {
        return (run_lo[a] <= run_hi[b]) & (run_lo[b] <= run_hi[a]);
      };
      if ((overlap(0, 1) | overlap(0, 2) | overlap(0, 3) | overlap(1, 2) | overlap(1, 3) | overlap(2, 3)) != 0)
        return CheckObjectsFiltered(src, n, out);
    } else {
      // More: sorted by their low ends (by insertion), each end below the next start.
      for (int a = 1; a < runs; ++a) {
        const uintptr_t lo = run_lo[a], hi = run_hi[a];
        int b = a;
        for (; b > 0 && run_lo[b - 1] > lo; --b) {
          run_lo[b] = run_lo[b - 1];
          run_hi[b] = run_hi[b - 1];
        }
        run_lo[b] = lo;
        run_hi[b] = hi;
      }
      for (int a = 1; a < runs; ++a)
        if (run_lo[a] <= run_hi[a - 1]) return CheckObjectsFiltered(src, n, out);
    }
  }
  src = at;
}

template <typename Source>
void CentralFreeList::CheckObjectsFiltered(Source& src, int n, void** out) const {
  filtered_batches_.store(filtered_batches_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  // Each pointer must be a block start of this class. The class map and the span base are
  // read once per page (the objects of a batch mostly share a few pages; blocks of classes
  // up to 1 KiB live in one-page spans, whose base is the page itself).
  // A double free separated by other frees shows up as a pointer twice in one batch: a
  // filter indexed by the object's number sends the rare pointer whose bit is already set
  // to an exact scan of the batch so far. The number is the span's first page times the
  // objects a span holds, plus the object's index in its span: unique per block of the
  // class, and consecutive for neighbours, so blocks less than a filter's width apart never
  // collide and a batch of neighbours (the common case) costs no scan at all. (A hash of
  // the page instead of its number made blocks of different pages collide at random: ~8
  // scans per batch of 128 from 32 pages, 4% of a loop freeing 1000 blocks of 256 B.)
  // Blocks far apart (a producer's objects freed by a consumer come from spans all over)
  // collide at random: n^2 / 2 pairs over the filter's bits. At 8 bits an object a batch
  // of 128 had ~8 collisions, each a scan of half the batch (xmalloc: 1.4-2.5% of its
  // samples); at 64 bits an object it has ~1, and clearing the 1 KiB costs less than the
  // scans did. A fixed 256 bits filled at a batch of 512 and sent most pointers to the
  // scan, O(n^2) per batch.
  const Source first = src;  // for the exact scan
  // In a local: as a reference it would be stored and re-read for every object.
  Source at = src;
  const size_t filter_bits = DuplicateFilterBits(n);
  const size_t filter_mask = filter_bits - 1;
  uint64_t filter[kMaxFilterBits / 64];
  __builtin_memset(filter, 0, filter_bits / 8);
  const bool one_page = SizeMap::ClassPages(cl_) == 1;
  // In locals: the compiler would re-read the members after every store to filter.
  const uint64_t magic = division_magic_;
  const size_t objects = objects_per_span_;
  uintptr_t cached_page = ~uintptr_t{0};
  uintptr_t base = 0;
  size_t mix = 0;
  // The filter word in use stays in a register while neighbours fall in it (as in
  // InsertChunk): in memory, each object's load waited for the previous one's store.
  size_t word_index = 0;
  uint64_t word = 0;
  for (int k = 0; k < n; ++k) {
    void* const obj = at.current();
    if (TCM_UNLIKELY(obj == nullptr)) ChainEndedEarly(first, n, k);
    const uintptr_t addr = reinterpret_cast<uintptr_t>(obj);
    const uintptr_t page = addr >> kPageShift;
    if (page != cached_page) {
      base = BatchSpanBase(obj, one_page);
      mix = (base >> kPageShift) * objects;  // the number of the span's first block
      cached_page = page;
    }
    const size_t offset = addr - base;
    bool starts_object;
    const size_t i = SizeMap::ExactObjectIndex(magic, offset, &starts_object);
    if (TCM_UNLIKELY(!starts_object || i >= objects)) NotABlockStart(obj, offset, kIntoTransfer);
    const size_t h = (i + mix) & filter_mask;
    if ((h >> 6) != word_index) {
      filter[word_index] = word;
      word_index = h >> 6;
      word = filter[word_index];
    }
    const uint64_t bit = uint64_t{1} << (h & 63);
    if (TCM_UNLIKELY((word & bit) != 0)) DuplicateInBatch(first, k, obj);
    word |= bit;
    if constexpr (std::is_same_v<Source, ChainSource>) out[k] = obj;
    at.advance();  // only once obj is known to be one of ours (a chain's link is read here)
  }
  src = at;
}

CentralFreeList* CentralFreeList::OtherOwner(const void* obj) const {
  const uintptr_t addr = reinterpret_cast<uintptr_t>(obj);
  if ((addr >> kAddressBits) != 0) return nullptr;  // foreign: the checks name it
  const Span* const span = pagemap_->GetSpan(PageId{addr >> kPageShift});
  if (span == nullptr) return nullptr;
  // Read without a lock: a span in use keeps its owner; a stale record (a bad pointer,
  // caught by the batch check) holds null or some list, and only where the batch parks
  // depends on it.
  CentralFreeList* const owner = span->owner;
  return owner == nullptr || owner == this || owner->cl_ != cl_ ? nullptr : owner;
}

CentralFreeList* CentralFreeList::ParkingFor(const void* first, const void* last) {
  // A batch freed on this shard's CPUs of objects another shard carved (a producer thread
  // allocates, a consumer on another CPU frees) is parked where it will be allocated
  // again: that shard takes it back from its transfer cache without span work, and this
  // shard's cache does not fill with objects nobody here asks for (xmalloc's consumer
  // kept 512 KiB a class parked, and its batches crossed to the owner's spans object by
  // object). The first and the last object must agree: a batch they do not agree on (a
  // CPU's own objects mixed with ones it took from another shard, as when a class is
  // sharded while its objects circulate) stays here, where its CPUs use it. Parked by its
  // first object alone, such a batch carried this shard's objects to the other one, whose
  // CPUs then freed them back mixed in the same way: two threads building trees of depth
  // 14 kept swapping objects between their CPUs and ran at half speed (83-84 against 166-179
  // M nodes a second) once their class had been sharded a few milliseconds into the run.
  // A batch that still holds some other shard's objects is sorted out at the spans.
  CentralFreeList* const owner = OtherOwner(first);
  if (owner == nullptr || (last != nullptr && OtherOwner(last) != owner) || owner->transfer_.LooksFull())
    return this;
  return owner;
}

void CentralFreeList::InsertBatch(void* const* objs, int n, bool local) {
  NoteCaller();
  // A batch is checked only if it may be parked: when the transfer cache is full (a racy
  // look, re-checked under its lock) the objects go to their spans, which check each one
  // anyway, so checking here too would do the work twice.
  if (n == transfer_.batch()) {
    CentralFreeList* const park = ParkingFor(objs[0], objs[n - 1]);
    // Parked at another shard, the batch crosses to that shard's CPUs: not local.
    const bool limit = local && park == this;
    if (!park->transfer_.LooksFull(limit)) {
      if (checks_) {
        ArraySource src{objs};
        CheckObjects(src, n, nullptr);
      }
      if (park->transfer_.TryInsert(objs, limit)) return;
    }
  }
  InsertToSpans(objs, n);
}

void CentralFreeList::CollectChain(ChainSource& src, int n, void** out) const {
  if (checks_) {
    CheckObjects(src, n, out);
    return;
  }
  for (int k = 0; k < n; ++k) {
    out[k] = src.current();
    src.advance();
  }
}

void* CentralFreeList::InsertList(void* start, int n, bool to_spans, bool local) {
  NoteCaller();
  // The chain's last object is known once it is walked: ParkingFor by the first, and the
  // last must then agree.
  CentralFreeList* park = !to_spans && n == transfer_.batch() ? ParkingFor(start, nullptr) : nullptr;
  if (park != nullptr && !park->transfer_.LooksFull(local && park == this)) {
    // One walk checks the batch, copies it into an array and reads the rest of the list.
    ChainSource src{start};
    void* batch[kMaxTransferBatch];
    CollectChain(src, n, batch);
    if (park != this && OtherOwner(batch[n - 1]) != park) park = this;
    if (!park->transfer_.TryInsert(batch, local && park == this)) InsertToSpans(batch, n);
    return src.current();
  }
  return InsertRange(start, n);
}

void CentralFreeList::FlushTransferCache() {
  transfer_.Drain([this](void* const* objs, int n) { InsertToSpans(objs, n); });
}

void CentralFreeList::FlushIdleTransferCache() {
  transfer_.DrainBelowLowWater([this](void* const* objs, int n) { InsertToSpans(objs, n); });
}

// Debug build: new objects carry the freed-object pattern too, so the check on hand-out
// (allocation.h) holds for every object.
void CentralFreeList::PoisonNew(void* obj) {
  size_t n = size_ < 256 ? size_ : 256;
  if (n > sizeof(void*)) __builtin_memset(static_cast<char*>(obj) + sizeof(void*), 0xfd, n - sizeof(void*));
}

bool CentralFreeList::Populate() {
  lock_.Unlock();
  Span* span;
  uint64_t* bits = nullptr;
  bool new_memory;
  {
    SpinLockHolder h(heap_->lock());
    span = heap_->New(Length{SizeMap::ClassPages(cl_)});
    if (span != nullptr) {
      heap_->RegisterSizeClass(span, cl_);
      // From the heap's pools (record_pool.h), whose pages go back to the OS once free:
      // kept per list, the bitmaps of a 188 MiB heap of small objects (~0.5 MiB) stayed.
      if (bitmap_words_ != 0) bits = heap_->NewBitmap(bitmap_words_);
    }
    new_memory = heap_->TakeNewMemoryCarved();
  }
  // The heap grows resident for this list: the spans other lists keep empty go back first
  // ("Kept spans").
  if (TCM_UNLIKELY(new_memory)) NewMemoryWasCarved();
  if (span == nullptr) {
    lock_.Lock();
    return false;
  }
  // The span is not visible to anyone yet.
  if constexpr (kDebugBuild) {
    char* p = static_cast<char*>(span->start_ptr());
    for (uint32_t i = 0; i < objects_per_span_; ++i, p += size_) PoisonNew(p);
  }
  // The 8-byte class keeps a list, empty with every object still to be carved.
  if (bitmap_words_ == 0) StartList(span);
  span->refcount = 0;
  span->owner = this;
  span->taker = 0;  // the record may have carried objects of another list before
  lock_.Lock();
  if (bitmap_words_ != 0) {
    if ((span->free_bits = bits) != nullptr) {
      for (uint32_t w = 0; w < objects_per_span_ / 64; ++w) span->free_bits[w] = ~uint64_t{0};
      if (objects_per_span_ % 64 != 0)
        span->free_bits[objects_per_span_ / 64] = (uint64_t{1} << (objects_per_span_ % 64)) - 1;
    } else {
      StartList(span);  // out of metadata: a list after all (rare)
    }
  }
  nonempty_.PushFront(span);
  free_objects_ += objects_per_span_;
  ++num_spans_;
  return true;
}

void CentralFreeList::StartList(Span* span) {
  // Nothing is written into the span: its objects are carved from the start as they are
  // taken (TakeFromList), so a new span's pages are touched only by the objects handed out.
  span->objects = nullptr;
  span->carved = 0;
}

template <typename Sink>
int CentralFreeList::TakeFromSpans(int n, Sink sink) {
  SpinLockHolder h(&lock_);
  // In locals: the sink stores into objects, which as far as the compiler knows may be
  // these members or the span's fields, so it would reload them for every object.
  const size_t size = size_;
  const uint32_t per_span = objects_per_span_;
  int got = 0;
  int counted = 0;  // objects already taken off free_objects_
  const int slot = CursorSlot(os::RseqCurrentCpu());
  while (got < n) {
    Span* span = SpanFor(slot);
    if (span == nullptr) {
      // Populate drops the lock: the count must match the spans before anyone can look.
      free_objects_ -= static_cast<size_t>(got - counted);
      counted = got;
      if (!Populate()) break;
      continue;
    }
    const uint32_t free_here = per_span - span->refcount;
    const int take = n - got < static_cast<int>(free_here) ? n - got : static_cast<int>(free_here);
    if (span->kept) {
      span->kept = false;
      __atomic_store_n(&kept_spans_, kept_spans_ - 1, __ATOMIC_RELAXED);
      kept_budget_->Give(KeptSpanBytes());
      ++kept_reused_;
    }
    uint64_t* const bits = span->free_bits;
    if (bits != nullptr) {
      // Lowest free objects first, word by word: nothing is read from the objects.
      const uintptr_t base = span->start_addr();
      int left = take;
      for (size_t w = 0; left > 0; ++w) {
        uint64_t word = bits[w];
        if (word == 0) continue;
        do {
          const size_t i = w * 64 + static_cast<size_t>(__builtin_ctzll(word));
          word &= word - 1;
          sink(reinterpret_cast<void*>(base + i * size), got++);
        } while (--left > 0 && word != 0);
        bits[w] = word;
      }
    } else {
      TakeFromList(span, take, got, sink);
      got += take;
    }
    span->refcount += static_cast<uint32_t>(take);
    if (span->refcount == per_span) {
      SpanList::Remove(span);
      empty_.PushFront(span);
    }
  }
  free_objects_ -= static_cast<size_t>(got - counted);
  return got;
}

Span* CentralFreeList::SpanFor(int slot) {
  Span* span = cursors_[slot];
  if (span != nullptr && span->refcount < objects_per_span_) return span;
  const auto others_cursor = [this, slot](const Span* s) {
    bool other = false;
    for (int i = 0; i < kCursorSlots; ++i) other |= i != slot && cursors_[i] == s;
    return other;
  };
  // From the front (new spans and spans that got objects back): first one this slot took
  // from before or nobody did, else one no other slot is carving now.
  Span* fallback = nullptr;
  int looked = 0;
  for (Span* s = nonempty_.first(); s != nullptr && looked < kSpanScan; s = nonempty_.NextOf(s), ++looked) {
    if (others_cursor(s)) continue;
    if (s->taker == 0 || s->taker == slot + 1) {
      fallback = s;
      break;
    }
    if (fallback == nullptr) fallback = s;
  }
  if (fallback != nullptr) fallback->taker = static_cast<uint8_t>(slot + 1);
  return cursors_[slot] = fallback;
}

template <typename Sink>
void CentralFreeList::TakeFromList(Span* span, int take, int got, Sink sink) {
  // Freed objects first (their lines are likely still in a cache), then fresh ones carved
  // in address order past `carved`, which were never handed out: nothing is read from or
  // written to them. Checked: every decoded link must be a block of this span that was
  // carved already (the head was checked as the link that led to it); a forged link to an
  // uncarved one would hand that block out twice.
  const bool checks = checks_;
  const uint64_t magic = division_magic_;
  const uintptr_t base = span->start_addr();
  const uint32_t carved = span->carved;
  const size_t limit = static_cast<size_t>(carved) * size_;
  // The list holds every carved object that is not out: a list that ends before that was
  // cut short (a link overwritten with an encoded null), whichever objects are wanted.
  const uint32_t on_list = carved - span->refcount;
  void* obj = span->objects;
  void* last = nullptr;
  int k = 0;
  for (; k < take && obj != nullptr; ++k) {
    void* const next = GetSpanLink(obj);
    if (checks && next != nullptr) {
      const size_t offset = reinterpret_cast<uintptr_t>(next) - base;  // wraps to huge below the span
      if (TCM_UNLIKELY(offset >= limit || !SizeMap::StartsObject(magic, offset))) BadLink(obj, next);
    }
    StoreWord(obj, 0);  // no link to another object leaves with it (the heap checker scans them)
    sink(obj, got + k);
    last = obj;
    obj = next;
  }
  span->objects = obj;
  if (k == take) return;
  if (TCM_UNLIKELY(static_cast<uint32_t>(k) != on_list)) BadLink(last, nullptr);
  const uint32_t fresh = static_cast<uint32_t>(take - k);
  // TakeFromSpans takes no more than the span's free count, which the tail then holds.
  uintptr_t p = base + limit;
  for (; k < take; ++k, p += size_) sink(reinterpret_cast<void*>(p), got + k);
  span->carved = carved + fresh;
}

int CentralFreeList::RemoveRange(void** start, void** end, int n) {
  NoteCaller();
  void* head = nullptr;
  void* tail = nullptr;
  void* batch[kMaxTransferBatch];
  if (n == transfer_.batch() && transfer_.TryRemove(batch)) {
    // Linked in the order they were parked: a thread cache pops them as a list would.
    for (int i = 0; i + 1 < n; ++i) SetLink(batch[i], batch[i + 1]);
    *start = batch[0];
    *end = batch[n - 1];
    return n;
  }
  const int got = TakeFromSpans(n, [&](void* obj, int) {
    // The chain so far ends at tail; obj goes after it.
    if (tail == nullptr) head = obj; else SetLink(tail, obj);  // NOLINT(readability-suspicious-call-argument)
    tail = obj;
  });
  if (got > 0) SetLink(tail, nullptr);
  *start = head;
  *end = tail;
  return got;
}

int CentralFreeList::RemoveBatch(void** out, int n) {
  NoteCaller();
  // Neither path touches the objects: the transfer cache holds pointers, bitmap spans hand
  // out addresses (a list span clears the link word of each object it hands out).
  if (n == transfer_.batch() && transfer_.TryRemove(out)) return n;
  return TakeFromSpans(n, [out](void* obj, int i) { out[i] = obj; });
}

void* CentralFreeList::InsertRange(void* start, int n) {
  ChainSource src{start};
  InsertObjects(src, n);
  return src.current();  // the n-th object's link, read before InsertChunk relinked it
}

void CentralFreeList::InsertToSpans(void* const* objs, int n) {
  int done = 0;
  while (done < n) {
    const int piece = n - done < kOwnRunPiece ? n - done : kOwnRunPiece;
    const int got = InsertOwnRuns(objs + done, piece);
    done += got;
    if (got < piece) break;
  }
  if (done == n) return;
  ArraySource src{objs + done};
  InsertObjects(src, n - done);
}

// Sets bit `bit` (mod 64) of *word and returns whether it was set already: one bts, where
// the shift of a 1 by a variable count, the test and the or took five instructions (three
// micro-ops for the shift alone on Intel).
static TCM_ALWAYS_INLINE bool TestAndSetBit(uint64_t* word, size_t bit) {
  bool was_set;
  asm("btsq %[bit], %[word]" : [word] "+r"(*word), "=@ccc"(was_set) : [bit] "r"(bit));
  return was_set;
}

int CentralFreeList::InsertOwnRuns(void* const* objs, int n) {
  // One run per span: the span is looked up and validated once, then its objects go
  // through a tight loop whose state (span base, bitmap word, count) lives in registers and
  // is stored when the run ends. The two-pass path (LookUpChunk, InsertChunk) stores and
  // re-reads 24 bytes an object in between (binary trees' nodes beyond the per-CPU arrays
  // paid ~45 instructions an object there); one loop carrying both the look-up and the
  // run state in locals spilled half of them to the stack (8 loads and stores an object).
  Span* to_release = nullptr;  // chained through ->next, released after dropping lock_
  void* none_out = nullptr;
  int i = 0;
  {
    SpinLockHolder h(&lock_);
    const bool checks = checks_;
    const uint8_t cl = cl_;
    const uint32_t per_span = objects_per_span_;
    const uint64_t magic = division_magic_;
    while (i < n) {
      const uintptr_t addr = reinterpret_cast<uintptr_t>(objs[i]);
      const uintptr_t page = addr >> kPageShift;
      Span* const span = (addr >> kAddressBits) == 0 ? pagemap_->GetSpan(PageId{page}) : nullptr;
      // Read under lock_: a span of ours, in use, covering the page (a stale pointer of a
      // page not in use fails one of these).
      if (span == nullptr || span->sizeclass != cl || span->location != Span::kInUse || span->owner != this ||
          page < span->start.index || page >= span->end().index)
        break;
      // Every object of it is back (this call gave it up, or another thread that has not
      // handed it to the page heap yet): a double free, named once lock_ is dropped.
      if (span->refcount == 0) {
        none_out = objs[i];
        break;
      }
      uint64_t* const bits = span->free_bits;
      if (bits == nullptr) break;
      const uintptr_t base = span->start_addr();
      const uint32_t refcount_before = span->refcount;
      uint32_t refcount = refcount_before;
      const int run_start = i;
      size_t word_index = 0;
      uint64_t word = bits[0];
      bool refused = false;  // an object the general path must handle (and report)
      for (; i < n; ++i) {
        // One bound for both ways out of the span: an offset past its last object (another
        // span's object above it, one below it wraps to a huge offset, or this span's tail)
        // has an index of per_span or more. The run ends there; a tail object makes the
        // next run empty, which hands it to the general path.
        const uintptr_t offset = reinterpret_cast<uintptr_t>(objs[i]) - base;
        bool starts_object;
        const size_t index = SizeMap::ExactObjectIndex(magic, offset, &starts_object);
        if (index >= per_span) break;
        if (checks && !starts_object) {
          refused = true;
          break;
        }
        if ((index >> 6) != word_index) {
          bits[word_index] = word;
          word_index = index >> 6;
          word = bits[word_index];
        }
        if (TestAndSetBit(&word, index)) {  // already free: a double free, reported by the general path
          refused = true;
          break;
        }
        // The last object out came back: the span goes; a later object of it is a double
        // free (the look-up above finds it with none out).
        if (--refcount == 0) {
          ++i;
          break;
        }
      }
      bits[word_index] = word;
      EndRun(span, refcount_before, refcount, static_cast<size_t>(i - run_start), &to_release);
      if (refused || i == run_start) break;
    }
    // A count for tests, under lock_: no read-modify-write of its own.
    own_run_objects_.store(own_run_objects_.load(std::memory_order_relaxed) + static_cast<size_t>(i),
                           std::memory_order_relaxed);
  }
  ReleaseSpans(to_release);
  if (none_out != nullptr) SpanHasNoneOut(none_out);
  return i;
}

template <typename Source>
void CentralFreeList::InsertObjects(Source& src, int n) {
  // In chunks: the look-ups and block-start checks run before the lock is taken, so two
  // threads returning objects of one class overlap in them and the lock is held only for
  // the span updates.
  Pending chunk[kInsertChunk];
  void* prev = nullptr;
  for (int done = 0; done < n;) {
    const int k = n - done < kInsertChunk ? n - done : kInsertChunk;
    bool all_own;
    LookUpChunk(chunk, src, &prev, n, done, k, &all_own);
    // Usually every span is this list's own (one shard, or objects freed where they were
    // allocated): no sorting by owner.
    if (all_own) InsertChunk(chunk, k); else InsertChunkAtOwners(chunk, k);
    done += k;
  }
}

template <typename Source>
void CentralFreeList::LookUpChunk(Pending* chunk, Source& src, void** prev, int n, int done, int k,
                                  bool* all_own) const {
  // Objects of one batch mostly share a page: the span and its base are looked up once
  // per page, not per object. Members in locals: the stores to chunk could alias them.
  const bool checks = checks_;
  const uint8_t cl = cl_;
  const size_t objects = objects_per_span_;
  const uint64_t magic = division_magic_;
  // The source position and the last object too: as references they would be stored and
  // re-read for every object (a store-to-load chain through memory).
  Source at = src;
  void* last = *prev;
  bool own = true;
  uintptr_t cached_page = ~uintptr_t{0};
  Span* span = nullptr;
  uintptr_t base = 0;
  for (int i = 0; i < k; ++i) {
    void* const obj = at.current();
    if (TCM_UNLIKELY(obj == nullptr)) ChainEndsEarly(kIntoSpans, n, done + i, last);
    const uintptr_t addr = reinterpret_cast<uintptr_t>(obj);
    const uintptr_t page = addr >> kPageShift;
    if (page != cached_page) {
      // The span pointer of a page that is not in use may be stale (a Span record reused
      // for other pages); such a span is either not of this class or does not cover obj,
      // which the offset check below and InsertChunk's re-check under the lock catch.
      span = pagemap_->GetSpan(PageId::FromPtr(obj));
      if (TCM_UNLIKELY(span == nullptr || span->sizeclass != cl)) {
        if (!checks) Crash("%s: invalid pointer %p (not a block of size class %u)", kIntoSpans, obj, unsigned{cl});
        if (done + i > 0) PrevFreedTwice(last);
        NotOfThisClass(obj, kIntoSpans);
      }
      own = own && span->owner == this;
      base = span->start_addr();
      cached_page = page;
    }
    // A stale span's offset may be anything: from 2^32 up the index is still beyond the
    // span's objects (SizeMap).
    const size_t offset = addr - base;
    bool starts_object;
    const size_t index = SizeMap::ExactObjectIndex(magic, offset, &starts_object);  // the bit to set
    if (checks) {
      if (TCM_UNLIKELY(!starts_object || index >= objects)) {
        if (done + i > 0) PrevFreedTwice(last);
        NotABlockStart(obj, offset, kIntoSpans);
      }
    }
    chunk[i] = Pending{obj, span, static_cast<uint32_t>(offset), static_cast<uint32_t>(index)};
    // Read only once obj is known to be one of ours (a corrupted chain can hold anything).
    last = obj;
    at.advance();
  }
  src = at;
  *prev = last;
  *all_own = own;
}

void CentralFreeList::InsertChunkAtOwners(Pending* chunk, int k) {
  while (k > 0) {
    // The objects of the first one's owner to the front, in one pass; usually all of them.
    const Span* const first = chunk[0].span;
    if (first == nullptr) __builtin_unreachable();  // LookUpChunk stores found spans only
    CentralFreeList* const owner = first->owner;
    int m = 1;
    const Span* seen = first;  // owner looked up once per run of one span
    bool seen_is_owners = true;
    for (int j = 1; j < k; ++j) {
      const Span* const span = chunk[j].span;
      if (span == nullptr) __builtin_unreachable();
      if (span != seen) {
        seen = span;
        seen_is_owners = span->owner == owner;
      }
      if (!seen_is_owners) continue;
      if (m != j) {
        const Pending t = chunk[m];
        chunk[m] = chunk[j];
        chunk[j] = t;
      }
      ++m;
    }
    // Read without a lock: a span can change hands only when none of its objects is out,
    // i.e. this one was not out either (a double free). The owner re-checks under its lock
    // that the span is still its own; a span that never had an owner of this class cannot
    // be this object's.
    if (owner == this) {
      InsertChunk(chunk, m);
    } else if (owner != nullptr && owner->cl_ == cl_) {
      owner->InsertChunk(chunk, m);
    } else {
      Crash("%s: invalid pointer %p (double free: its span was given back; size class %u, %u bytes)", kIntoSpans,
            chunk[0].obj, unsigned{cl_}, size_);
    }
    chunk += m;
    k -= m;
  }
}

void CentralFreeList::PrevFreedTwice(void* prev) const {
  // The objects of a chain are looked up before any of them enters its span, so a block
  // that is already free in its span (a double free) is only seen when its link, a span
  // link, decodes to garbage. Name the block rather than the garbage.
  Span* span = pagemap_->GetSpan(PageId::FromPtr(prev));
  const CentralFreeList* owner = this;
  if (span != nullptr && span->sizeclass == cl_ && span->owner != nullptr && span->owner->cl_ == cl_)
    owner = span->owner;  // its bits are guarded by its owner's lock
  SpinLockHolder h(&owner->lock_);
  if (span != nullptr && span->sizeclass == cl_ && span->owner == owner && span->free_bits != nullptr &&
      TestBit(span->free_bits, IndexOf(reinterpret_cast<uintptr_t>(prev) - span->start_addr())))
    Crash("%s: invalid pointer %p (double free: the block is already free in its span; size class %u, %u bytes)",
          kIntoSpans, prev, unsigned{cl_}, size_);
}

void CentralFreeList::InsertChunk(const Pending* chunk, int k) {
  Span* to_release = nullptr;  // chained through ->next, released after dropping lock_
  {
    SpinLockHolder h(&lock_);
    // A chunk's objects mostly come in runs of one span: each run's counts (and, for a
    // span with a list, its links) are kept in locals and stored once.
    for (int i = 0; i < k;) {
      Span* const span = chunk[i].span;
      if (span == nullptr) __builtin_unreachable();  // LookUpChunk stores found spans only
      // The look-up ran without the lock: a span can go away meanwhile only if none of its
      // objects is out, i.e. obj was not out either (a double free); then it is no longer
      // this class's span at obj's place, or its count says so below. A span that holds
      // one object of the chunk cannot go away while this lock is held.
      if (TCM_UNLIKELY(span->sizeclass != cl_ || span->location != Span::kInUse || span->owner != this ||
                       reinterpret_cast<uintptr_t>(chunk[i].obj) - span->start_addr() != chunk[i].offset))
        Crash("%s: invalid pointer %p (double free: its span was given back; size class %u, %u bytes)", kIntoSpans,
              chunk[i].obj, unsigned{cl_}, size_);
      uint64_t* const bits = span->free_bits;
      const uint32_t refcount_before = span->refcount;
      uint32_t refcount = refcount_before;
      const int first = i;
      if (bits != nullptr) {
        // The bitmap word in a register while the run stays in it (neighbours usually
        // do): set bit by bit in memory, each object's load waited for the previous store.
        size_t word_index = chunk[i].index >> 6;
        uint64_t word = bits[word_index];
        do {
          if (TCM_UNLIKELY(refcount == 0)) SpanHasNoneOut(chunk[i].obj);
          const size_t index = chunk[i].index;
          if ((index >> 6) != word_index) {
            bits[word_index] = word;
            word_index = index >> 6;
            word = bits[word_index];
          }
          const uint64_t bit = uint64_t{1} << (index & 63);
          if (TCM_UNLIKELY((word & bit) != 0)) AlreadyFreeInSpan(chunk[i].obj);
          word |= bit;
          --refcount;
          ++i;
          // A span whose last object came back ends the run: a later object of it in this
          // chunk is a double free, caught as a new run (its count is 0).
        } while (i < k && chunk[i].span == span && refcount != 0);
        bits[word_index] = word;
      } else {
        // Blocks past the carved ones were never handed out: they are free already, as a
        // set bit says in a bitmap span (and one freed would be carved again later).
        const size_t carved_bytes = size_t{span->carved} * size_;
        void* head = span->objects;
        do {
          if (TCM_UNLIKELY(refcount == 0)) SpanHasNoneOut(chunk[i].obj);
          if (TCM_UNLIKELY(chunk[i].offset >= carved_bytes)) AlreadyFreeInSpan(chunk[i].obj);
          SetSpanLink(chunk[i].obj, head);
          head = chunk[i].obj;
          --refcount;
          ++i;
        } while (i < k && chunk[i].span == span && refcount != 0);
        span->objects = head;
      }
      EndRun(span, refcount_before, refcount, static_cast<size_t>(i - first), &to_release);
    }
  }
  ReleaseSpans(to_release);
}

void CentralFreeList::EndRun(Span* span, uint32_t refcount_before, uint32_t refcount, size_t returned,
                             Span** to_release) {
  const uint32_t per_span = objects_per_span_;
  if (refcount_before == per_span) {  // it was on empty_
    SpanList::Remove(span);
    nonempty_.PushFront(span);
  }
  span->refcount = refcount;
  free_objects_ += returned;
  if (refcount != 0) return;
  // Kept: on nonempty_ as it is, at the front, so the next allocation takes it while its
  // lines are still in this CPU's caches.
  if (kept_budget_ != nullptr && span->free_bits != nullptr && kept_budget_->Take(KeptSpanBytes())) {
    span->kept = true;
    __atomic_store_n(&kept_spans_, kept_spans_ + 1, __ATOMIC_RELAXED);
    SpanList::Remove(span);
    nonempty_.PushFront(span);
    return;
  }
  Unlist(span, to_release);
}

void CentralFreeList::Unlist(Span* span, Span** to_release) {
  for (Span*& cursor : cursors_)
    if (cursor == span) cursor = nullptr;
  SpanList::Remove(span);
  free_objects_ -= objects_per_span_;
  --num_spans_;
  span->objects = nullptr;  // (the bitmap goes back with the span, in ReleaseSpans)
  span->next = *to_release;
  *to_release = span;
}

size_t CentralFreeList::ReleaseKeptSpans(size_t keep) {
  Span* to_release = nullptr;
  size_t released = 0;
  {
    SpinLockHolder h(&lock_);
    // The first kept spans on nonempty_ are the most recently emptied (EndRun pushes them
    // at the front): those stay.
    size_t seen = 0;
    for (Span* s = nonempty_.first(); s != nullptr && kept_spans_ > keep;) {
      Span* const next = nonempty_.NextOf(s);
      if (s->kept && ++seen > keep) {
        s->kept = false;
        __atomic_store_n(&kept_spans_, kept_spans_ - 1, __ATOMIC_RELAXED);
        kept_budget_->Give(KeptSpanBytes());
        Unlist(s, &to_release);
        released += KeptSpanBytes();
      }
      s = next;
    }
  }
  ReleaseSpans(to_release);
  return released;
}

size_t CentralFreeList::ReleaseKeptSpansBeyondDemand() {
  if (kept_budget_ == nullptr) return 0;
  kept_budget_->Open();  // a surplus release closed it until this pass
  size_t keep;
  {
    SpinLockHolder h(&lock_);
    keep = kept_reused_;
    kept_reused_ = 0;
    if (kept_spans_ <= keep) return 0;
  }
  return ReleaseKeptSpans(keep);
}

void CentralFreeList::ReleaseSpans(Span* chain) {
  if (chain == nullptr) return;
  bool fired;
  {
    SpinLockHolder h(heap_->lock());
    while (chain != nullptr) {
      Span* next = chain->next;
      if (chain->free_bits != nullptr) {
        heap_->DeleteBitmap(chain->free_bits, bitmap_words_);
        chain->free_bits = nullptr;
      }
      heap_->Delete(chain);
      chain = next;
    }
    fired = heap_->TakeSurplusReleased();
  }
  if (TCM_UNLIKELY(fired)) SurplusWasReleased();
}

void SurplusWasReleased() {
  const SurplusReleased hook = __atomic_load_n(&g_surplus_released, __ATOMIC_ACQUIRE);
  if (hook != nullptr) hook();
}

void NewMemoryWasCarved() {
  const NewMemoryCarved hook = __atomic_load_n(&g_new_memory_carved, __ATOMIC_ACQUIRE);
  if (hook != nullptr) hook();
}

void CentralFreeList::SpanHasNoneOut(void* obj) const {
  Crash("%s: invalid pointer %p (double free: its span has no blocks out; size class %u, %u bytes)", kIntoSpans, obj,
        unsigned{cl_}, size_);
}

void CentralFreeList::AlreadyFreeInSpan(void* obj) const {
  Crash("%s: invalid pointer %p (double free: the block is already free in its span; size class %u, %u bytes)",
        kIntoSpans, obj, unsigned{cl_}, size_);
}

void CentralFreeList::Verify() {
  SpinLockHolder h(&lock_);
  size_t free_count = 0, spans = 0, kept = 0;
  for (SpanList* list : {&nonempty_, &empty_}) {
    for (Span* s = list->first(); s != nullptr; s = list->NextOf(s)) {
      ++spans;
      TCM_CHECK(s->location == Span::kInUse && s->sizeclass == cl_ && s->owner == this);
      size_t in_span = 0;
      if (s->free_bits != nullptr) {
        for (uint32_t i = 0; i < objects_per_span_; ++i) in_span += TestBit(s->free_bits, i);
        for (uint32_t i = objects_per_span_; i < bitmap_words_ * 64; ++i) TCM_CHECK(!TestBit(s->free_bits, i));
      } else {
        TCM_CHECK(s->carved <= objects_per_span_);
        in_span = objects_per_span_ - s->carved;  // never handed out
        for (void* o = s->objects; o != nullptr; o = GetSpanLink(o)) {
          TCM_CHECK(pagemap_->GetSpan(PageId::FromPtr(o)) == s);
          const size_t offset = static_cast<size_t>(static_cast<char*>(o) - static_cast<char*>(s->start_ptr()));
          TCM_CHECK(offset % size_ == 0 && offset < size_t{s->carved} * size_);
          ++in_span;
          TCM_CHECK(in_span <= objects_per_span_);
        }
      }
      TCM_CHECK(in_span + s->refcount == objects_per_span_);
      TCM_CHECK(!s->kept || (s->refcount == 0 && list == &nonempty_ && kept_budget_ != nullptr));
      kept += s->kept;
      TCM_CHECK((list == &empty_) == (in_span == 0));
      free_count += in_span;
    }
  }
  TCM_CHECK(free_count == free_objects_);
  TCM_CHECK(kept == kept_spans_);
  TCM_CHECK(spans == num_spans_);
}

}  // namespace tcm
