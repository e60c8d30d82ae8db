// CentralFreeList: the shared free objects of one size class, kept as a set of spans each
// with its own free objects (the design's two-level structure).
//
// Front ends move objects in and out in batches: thread caches as chains linked through
// each object's first word, per-CPU caches as arrays. A span whose objects are all free
// again goes back to the page heap. A span of a class from 16 bytes keeps its free objects
// as a bitmap (Span::free_bits, one bit per object): they leave lowest address first, and
// neither taking nor returning them reads or writes an object. The 8-byte class (a bitmap
// would cost it 1.6% of its memory) and a span whose bitmap could not be allocated keep a
// list of freed objects linked through the objects, and carve the ones never handed out
// from the span's start in address order (Span::carved): a new span is not threaded
// through, so its memory is touched only as its objects are used.
//
// Hardening (checks_, on unless TCMALLOC_HARDENED=0): every batch a front end hands in is
// checked object by object where it arrives (every Insert* entry point), off the
// malloc/free fast paths: each pointer must be the start of a block of this class (span
// offset a multiple of the class size, by reciprocal multiplication), a batch must not name
// one object twice, and an object entering its span must not already be free there (its
// bit; spans with lists have only their counts). Span lists are linked through
// freelist_link.h's encoded words and every decoded link is checked against the span when
// objects leave it. A failure aborts with the pointer, the class and the operation. A
// bitmap span catches a double free whether or not checks are on: the bit is read anyway.
//
// Shards: each class has one central list per shard (globals: [shard][class]); a CPU's
// misses go to the lists of its shard (CentralOf), so threads on different CPUs do not
// meet on one lock, and an object freed where it was allocated is reused there. A span
// belongs to the list that carved it (Span::owner): objects that reach another shard's
// InsertRange go to their span's owner, under the owner's lock. Transfer caches are per
// shard; a whole batch freed on one shard's CPUs whose first and last objects another shard carved
// parks in that shard's transfer cache, where its allocating side takes it back
// (ParkingFor); what a shard parks goes back to its spans when it sits idle (the scavenger).
// A class uses its lists beyond shard 0 only once its shard-0 list is used from CPUs of
// different shards in turn at a high rate (CentralShards): kShardAfterHandoffs times within
// kShardWindowNs a call came from another shard's CPU than the call before it. Each such
// hand-off moves the list's lock, heads and span words between the CPUs' caches, whether
// or not anybody waits. Every shard keeps its own partly used spans and transfer cache,
// which costs memory where hand-offs are rare: two threads of t-test2 (random sizes up to
// 4 KiB, each freeing what the other allocated) hand a list over at most ~280 times in
// their 140 ms, and peaked at 14.3-14.7 MB with every class sharded, 8.7-9.1 with none, no
// slower. Two threads building trees of 16-byte nodes hand their one list over ~25,000
// times per 100 ms and run 1.2x faster sharded; t-test1's two threads at 64 KiB, ~3,400
// a class, 1.08x (at a peak 4-6 MB higher). Counting threads that waited for the lock
// instead missed the trees: they wait only ~2,800 times in 100 ms, under any threshold
// t-test2 stays below, and their class was sharded 0.6-0.8 s into a 1.1 s run, which ran
// 7% slower than with every class sharded. A class, once sharded, stays so.
//
// Carving cursors: CPUs that share a list (a class not sharded, or more CPUs than shards)
// still take their objects from spans of their own. Each CPU's slot (CursorSlot) has a
// cursor span it takes from until it is used up, then the first span from the list's front
// that it took from before or nobody did (Span::taker), then any no other slot is carving,
// and only when there is none a new span. A list holds at most one span a slot more than
// an unshared one. Before, every refill took the front span: two CPUs whose caches started
// up together (slow start: 1, 2, 4, ... objects a refill) got its objects in turn, their
// first objects shared cache lines for the rest of the run, and two threads writing them
// took 1.3x the CPU time of the same work done on one (bench/stl_mix; t-test1 on two
// threads at 4 KiB and binary trees gained too: bench/README.md "Twenty-eighth session";
// integration.thread_lines_test counts the lines two threads share).
//
// Kept spans: a span of kKeptSpanMinObjects objects or more (every one-page span, and the
// 2-8 page spans of classes up to 8 KiB) whose objects are all free again stays on this
// list, bitmap ready, while the shared budget (ByteBudget, given to Init; a span counts its
// whole length) has room: the list's next allocations take it back without the page heap.
// A working set of 1000 blocks of 4 KiB, more than a CPU's cache and the transfer cache
// hold, sent ~50 spans of 64 KiB through the page heap and back on every round, a quarter
// of its time (bench/README.md, "Thirty-ninth session"). Spans of a few objects (32 KiB
// and up) are not kept: one live object pins such a span. Sent back at
// once, a span went to the one page heap all shards share, and the next span the page heap
// carved for a list was as likely another CPU's just-freed pages: two threads building and
// freeing trees of 2-8 MiB each took 12-15% longer a node, their own loads and stores
// waiting on lines the other core had written (binary trees, depth 16 and 18). A list
// keeps no more spans than its allocations took back from its kept ones in the last
// maintenance interval (ReleaseKeptSpansBeyondDemand): a program that goes on with light
// work after freeing a large heap reuses a span or two a class, and the rest of the budget
// goes back within one interval. (Keeping all of them while the list took anything from
// its spans held up to 8 MiB through a second of such light work: issue 12's 20 MiB.)
// ReleaseKeptSpans (ReleaseFreeMemory) gives back all of them. And when spans a list gives
// back make the page heap's surplus rule fire (the program freed far more than it uses:
// a thread exited, a big structure was emptied), or a large block freed does, every
// list's kept spans go back at once and no list keeps any until the next pass
// (SetSurplusReleased, PageHeap::TakeSurplusReleased): one kept span is enough
// to keep a huge page from being released whole, and a 300 MB heap freed on one thread
// kept 80 MiB resident against 48 without them (integration.phase_test). Kept spans are
// pages the heap reuses before it grows: when a New of the page heap hands out pages the
// process does not hold yet (PageHeap::TakeNewMemoryCarved; a list's Populate or a large
// block), every list's kept spans go back to the page heap (SetNewMemoryCarved), and the
// lists may keep spans again at once (t-test1 at 64 KiB, one thread: peak 31.8 MiB keeping
// the bigger spans without this, 31.1 with it, 30.4 keeping one-page spans only).
//
// Locking: lock_ guards everything here. Objects of arrays (per-CPU caches, drains, the
// transfer cache) that belong to this list's own bitmap spans go back in one pass under
// lock_, at most 256 per hold (InsertOwnRuns): the look-up, the checks and the bit. Everything
// else (chains from thread caches, another shard's spans, list spans) takes the two-pass
// path: per-object work that needs no shared state (span look-ups, block-start checks)
// runs before lock_ is taken, and under it only the span lists, counts and free bits
// change. Batch checks for the transfer cache run without it. It is never held while taking the page heap lock
// (that order would serialise all classes behind one lock): Populate and span release drop
// lock_ first. Lock order when both are needed: central lock, then page heap lock, never
// the reverse.
#ifndef TCMALLOC_CENTRAL_FREELIST_H_
#define TCMALLOC_CENTRAL_FREELIST_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "base/log.h"
#include "base/spinlock.h"
#include "core/byte_budget.h"
#include "core/freelist_link.h"
#include "core/page_heap.h"
#include "core/size_classes.h"
#include "core/span.h"
#include "core/transfer_cache.h"

namespace tcm {

// The largest batch (TCMALLOC_TRANSFER_NUM_OBJ's upper bound): front ends and the central
// list keep batches in arrays of this size on the stack.
inline constexpr int kMaxTransferBatch = 1024;

// At most this many shards per class; CentralShardsFor picks how many a machine gets.
inline constexpr int kMaxCentralShards = 8;

// Shards for a machine with `cpus` possible CPUs: the largest power of two not above
// min(cpus, kMaxCentralShards) (CPU n uses shard n mod shards), at least 1.
int CentralShardsFor(int cpus);

// Which shards the lists of a machine use: `count` shards (a power of two), and for each
// class whether it left shard 0 (set once, by the composition root's ShardClassHook).
// Read on every central-list access; written at most once a class.
struct CentralShards {
  int count = 1;
  std::atomic<bool> sharded[kNumClasses] = {};
};

class CentralFreeList;
// The list of class cl for `cpu` (-1: not known) in an array laid out [shard][class]: the
// list of cpu's shard once the class is sharded, shard 0's before (and always when shards is
// nullptr: one shard). A list not set up yet (ready() false)
// is set up first, by the function SetCentralSetUp installed: the composition root sets up
// each list on its first use, so a program never writes (and keeps resident) the lists of
// classes it does not use or of shards whose CPUs it never runs on.
inline CentralFreeList& CentralOf(CentralFreeList* lists, const CentralShards* shards, int cpu, size_t cl);
using CentralSetUp = void (*)(const CentralFreeList* list);  // sets up that list
void SetCentralSetUp(CentralSetUp set_up);
// Called (no lock held) when the shard-0 list of class cl, watching its callers' shards
// (WatchHandoffs), was handed between shards often (kShardAfterHandoffs within
// kShardWindowNs): the composition root shards the class. nullptr: nothing is done.
using ShardClassHook = void (*)(size_t cl);
void SetShardClassHook(ShardClassHook hook);

// The clock the hand-off watch reads, in ns; nullptr (the default): the coarse monotonic
// clock. Tests set one they drive, so whether hand-offs came within the window does not
// depend on how the scheduler ran their threads.
using HandoffClock = uint64_t (*)();
void SetHandoffClock(HandoffClock clock);
// Called (no lock held) after spans a list gave back made the page heap's surplus rule
// release memory: the composition root gives back every list's kept spans and closes their
// budget until the next maintenance pass ("Kept spans" below). nullptr: nothing is done.
using SurplusReleased = void (*)();
void SetSurplusReleased(SurplusReleased hook);
// Runs the installed hook: for every caller whose Delete made the page heap's surplus rule
// release (PageHeap::TakeSurplusReleased), lists' spans and large blocks alike.
// REQUIRES no allocator lock held.
void SurplusWasReleased();
// Called (no lock held) after a New of the page heap handed out pages not yet resident
// (PageHeap::TakeNewMemoryCarved): the composition root gives back every list's kept spans,
// so the heap reuses them before it grows; unlike a surplus release, lists may keep spans
// again at once. nullptr: nothing is done.
using NewMemoryCarved = void (*)();
void SetNewMemoryCarved(NewMemoryCarved hook);
// Runs that hook: for every caller of PageHeap::New whose TakeNewMemoryCarved was true.
void NewMemoryWasCarved();

class CentralFreeList {
 public:
  constexpr CentralFreeList() = default;

  // checked = the hardening checks described above (TCMALLOC_HARDENED). The class is
  // published last: ready() is true once everything else is in place.
  // kept_spans: the budget that this list's kept empty spans count against (see "Kept
  // spans" above); nullptr keeps none (every empty span goes back to the page heap).
  void Init(uint8_t cl, PageHeap* heap, PageMap* pagemap, bool checked = true, ByteBudget* kept_spans = nullptr);
  bool ready() const { return __atomic_load_n(&cl_, __ATOMIC_ACQUIRE) != 0; }
  // Runs the installed CentralSetUp for this list (crashes if none is installed).
  TCM_NOINLINE void SetUp();

  // Hand-offs between shards that shard a class when they come this fast; see "Shards".
  static constexpr uint32_t kShardAfterHandoffs = 1024;
  static constexpr uint64_t kShardWindowNs = 100'000'000;
  // Lists whose spans hold at least this many objects keep emptied spans ("Kept spans").
  static constexpr uint32_t kKeptSpanMinObjects = 8;
  // From now on the front-end calls note the shard of the caller's CPU (CPU n: shard
  // n & (shards - 1); shards a power of two) and run the ShardClassHook once calls
  // from another shard than the call before come at the rate above (shard-0 lists of a
  // machine with more than one shard). Once the hook ran, watching stops. Callers whose
  // CPU is not known (no rseq area) are not counted.
  void WatchHandoffs(int shards);
  bool watching_handoffs() const { return watch_handoffs_.load(std::memory_order_relaxed); }
  // Calls from another shard than the call before, since watching began (racy; wraps).
  uint32_t handoffs() const { return handoffs_.load(std::memory_order_relaxed); }

  // Takes up to n (>= 1) objects and returns them as a chain start..end (end's next word is
  // garbage). Returns how many were taken; 0 only when out of memory. A request for exactly
  // one batch is served from the transfer cache when it has one.
  int RemoveRange(void** start, void** end, int n);

  // Same, as an array, for front ends that keep arrays (cpu_cache): stores up to n objects
  // in out without touching them. Objects that came in through arrays carry no link word.
  int RemoveBatch(void** out, int n);

  // Gives back an array of n objects: a whole batch goes to a transfer cache when one has
  // room (the shard's that carved its first and last objects' spans, else this one: ParkingFor),
  // anything else to the spans. For front ends that keep arrays. local: freed on a CPU
  // that allocates the class too (TransferCache::kLocalOneBatchBytes).
  void InsertBatch(void* const* objs, int n, bool local = false);
  // Gives back an array of n objects directly to their spans (a drained cache: what sat
  // unused should free its spans, not wait in the transfer cache).
  TCM_NOINLINE void InsertToSpans(void* const* objs, int n);


  // Gives back a chain of n objects (n >= 1) starting at start directly to their spans.
  // Crashes on a double free it can see (an object whose span has no objects out, or, when
  // checked, one already free in its span) and on pointers that are not blocks of this class.
  // Returns the n-th object's link as it was (the rest of a longer list).
  void* InsertRange(void* start, int n);

  // Gives back the first n objects (n >= 1) of the linked list at start, like
  // InsertRange(start, end, n) (or InsertRange(start, n) if to_spans), and returns the
  // rest of the list: for front ends that keep lists (thread_cache), so the list is walked
  // once, not once to cut it and again to check the batch. A whole batch parks in a
  // transfer cache as InsertBatch's does, `local` as there (freed by a thread that
  // allocates the class too).
  void* InsertList(void* start, int n, bool to_spans, bool local = false);

  // Crashes unless obj is the start of a block of this class ("call" names the operation in
  // the message). Returns obj's span and stores obj's index in it in *index.
  TCM_ALWAYS_INLINE Span* CheckObject(void* obj, size_t* index, const char* call) const {
    const uintptr_t addr = reinterpret_cast<uintptr_t>(obj);
    // The class map first: it is exact for every page (span pointers of free pages are not).
    if (TCM_UNLIKELY((addr >> kAddressBits) != 0 || pagemap_->ClassOf(addr) != cl_)) NotOfThisClass(obj, call);
    Span* span = pagemap_->GetSpan(PageId::FromPtr(obj));
    const size_t offset = addr - span->start_addr();
    bool starts_object;
    const size_t i = SizeMap::ExactObjectIndex(division_magic_, offset, &starts_object);
    if (TCM_UNLIKELY(!starts_object || i >= objects_per_span_)) NotABlockStart(obj, offset, call);
    *index = i;
    return span;
  }
  bool checked() const { return checks_; }
  // Bits of the batch check's duplicate filter for a batch of n: 64 an object, a power of
  // two, at least 256 and at most 8 an object of the largest batch (1 KiB on the stack).
  static constexpr size_t kMaxFilterBits = 8 * kMaxTransferBatch;
  static constexpr size_t DuplicateFilterBits(int n) {
    size_t bits = 256;
    while (bits < 64 * static_cast<size_t>(n) && bits < kMaxFilterBits) bits *= 2;
    return bits;
  }
  // The batch check's proof that a batch holds no pointer twice (CheckObjects) splits it
  // into at most kMaxRuns runs.
  static constexpr int kMaxRuns = 32;
  // A run's steps are at most kRunJump blocks: a jump further starts a new run (a run
  // stretched over a jump took in the range of runs that fill the gap later).
  static constexpr size_t kRunJump = 16;
  // Whether the batch check of arrays (per-CPU caches) takes four objects a step with AVX2
  // vector instructions; on by Init where the CPU has them. Tests turn it off to cover the
  // one-object loop; turning it on where the CPU lacks AVX2 leaves it off.
  bool vector_check() const { return vector_check_; }
  void SetVectorCheck(bool on);
  static bool VectorCheckAvailable();  // the CPU has AVX2
  // Batches whose duplicate filter sent a pointer to the exact scan (racy; for tests).
  size_t exact_scans() const { return exact_scans_.load(std::memory_order_relaxed); }
  // Batches the check saw, and those it sent to the duplicate filter (racy counts, which
  // may miss increments made at the same time on two CPUs: tcmalloc.batch_check_*).
  size_t checked_batches() const { return checked_batches_.load(std::memory_order_relaxed); }
  size_t filtered_batches() const { return filtered_batches_.load(std::memory_order_relaxed); }
  // Batches whose runs were counted (all but those of more than kMaxRuns runs) by their
  // number of runs: [r - 1] for r = 1 .. kRunsCounted - 1, [kRunsCounted - 1] for more
  // (racy; GetStats).
  static constexpr int kRunsCounted = 5;
  size_t batches_with_runs(int i) const { return batches_by_runs_[i].load(std::memory_order_relaxed); }
  // Objects the vector step of the batch check passed (racy; for tests).
  size_t vector_checked_objects() const { return vector_checked_objects_.load(std::memory_order_relaxed); }
  // Objects InsertToSpans handled in its one-pass path (racy; for tests).
  size_t own_run_objects() const { return own_run_objects_.load(std::memory_order_relaxed); }

  // Returns every object parked in the transfer cache to the spans (ReleaseFreeMemory).
  void FlushTransferCache();
  // Maintenance: returns the objects that sat in the transfer cache unused since the
  // previous call (below its low-water mark: all of them if nobody took any).
  void FlushIdleTransferCache();
  // Gives kept spans back to the page heap, all but the `keep` most recently emptied;
  // returns their bytes. REQUIRES lock() not held.
  size_t ReleaseKeptSpans(size_t keep = 0);
  // The maintenance pass's: keeps as many kept spans as allocations took back from kept
  // spans since the previous call, gives back the rest; returns the bytes given back.
  // Also opens the shared budget a surplus release closed.
  size_t ReleaseKeptSpansBeyondDemand();
  size_t kept_spans() const { return __atomic_load_n(&kept_spans_, __ATOMIC_RELAXED); }
  size_t transfer_objects() const { return transfer_.free_objects(); }
  TransferCache* transfer_cache() { return &transfer_; }

  // Free objects held here (racy read for stats).
  size_t free_objects() const { return __atomic_load_n(&free_objects_, __ATOMIC_RELAXED); }
  size_t num_spans() const { return __atomic_load_n(&num_spans_, __ATOMIC_RELAXED); }

  SpinLock* lock() { return &lock_; }
  void ResetLockAfterFork() { lock_.ResetAfterFork(); }

  // Invariant walk for tests and debug builds. REQUIRES lock() not held.
  void Verify();

 private:
  // offset / size_ for offsets inside a span (SizeMap::ObjectIndex with the magic cached).
  size_t IndexOf(size_t offset) const { return SizeMap::IndexByMagic(division_magic_, offset); }
  [[noreturn]] TCM_NOINLINE void NotOfThisClass(void* obj, const char* call) const;
  [[noreturn]] TCM_NOINLINE void NotABlockStart(void* obj, size_t offset, const char* call) const;
  [[noreturn]] TCM_NOINLINE void BadLink(const void* obj, const void* next) const;
  [[noreturn]] TCM_NOINLINE void ChainEndsEarly(const char* call, int n, int k, const void* last) const;
  // Where the per-object work takes its objects from: a chain linked through the objects'
  // first words (thread caches), or an array (per-CPU caches, the transfer cache).
  struct ChainSource {
    void* obj;
    void* current() const { return obj; }
    void advance() { obj = GetLink(obj); }
  };
  struct ArraySource {
    void* const* objs;
    void* current() const { return *objs; }
    void advance() { ++objs; }
  };
  // For CheckObjects at a turn (the run has two objects or more, so there is one before
  // prev): that object; arrays only (a chain cannot look back).
  static uintptr_t ObjectBeforePrev(const ArraySource& at) { return reinterpret_cast<uintptr_t>(at.objs[-2]); }
  // Never called (CheckObjects asks only for arrays); the branch that asks compiles for both.
  static uintptr_t ObjectBeforePrev(const ChainSource&) { return 0; }
  // The list of this class that carved obj's span when that is another list, else nullptr
  // (also for pointers that are not ours: the checks name those).
  CentralFreeList* OtherOwner(const void* obj) const;
  // The list whose transfer cache a whole batch from `first` to `last` should park in: the
  // shard that carved the spans of both when that is another shard with room, else this
  // one (last == nullptr: not known yet, the caller checks it once it is).
  CentralFreeList* ParkingFor(const void* first, const void* last);
  // Crashes with a double-free message if prev is already free in its span.
  TCM_NOINLINE void PrevFreedTwice(void* prev) const;
  // ChainEndsEarly for CheckObjects: finds the last object from the batch's start.
  template <typename Source>
  [[noreturn]] TCM_NOINLINE void ChainEndedEarly(Source first, int n, int k) const;
  // The front-end calls' note of their caller's shard: a load and a test unless watching,
  // a store only on a hand-off.
  void NoteCaller() {
    if (TCM_UNLIKELY(watch_handoffs_.load(std::memory_order_relaxed))) NoteCallerWatched();
  }
  void NoteCallerWatched();
  TCM_NOINLINE void HandoffsReached(uint32_t count);
  // Crashes if obj is among the first k objects of src.
  template <typename Source>
  TCM_NOINLINE void DuplicateInBatch(Source src, int k, void* obj) const;
  // n objects from src to their spans in chunks: the look-ups and checks without the lock,
  // then the span updates under it.
  template <typename Source>
  void InsertObjects(Source& src, int n);
  struct Pending {
    void* obj;
    Span* span;
    uint32_t offset;  // obj - span start, as looked up (spans of small classes are < 4 GiB)
    uint32_t index;   // obj's index in the span
  };
  static constexpr int kInsertChunk = 64;
  // Validates the next k objects of src (done of n already handled; *prev is the last
  // object handled, for messages) into chunk, advancing src past them. Sets *all_own when
  // every object's span was (when looked at) this list's own.
  template <typename Source>
  void LookUpChunk(Pending* chunk, Source& src, void** prev, int n, int done, int k, bool* all_own) const;
  void InsertChunk(const Pending* chunk, int k);  // takes lock_ (and the page heap's)
  // The common case of InsertToSpans in one pass under lock_: objects of this list's own
  // bitmap spans, looked up, checked and set without the Pending round trip (at most
  // kOwnRunPiece a call, to bound the lock hold). Returns how many leading objects it took;
  // it stops at the first one that needs the general path (another shard's span, a list
  // span, anything a check or the bitmap refuses), which then reports it as it always did.
  static constexpr int kOwnRunPiece = 256;
  TCM_NOINLINE int InsertOwnRuns(void* const* objs, int n);
  // Stores a run's result in its span: `returned` objects came back, its count went from
  // refcount_before to refcount; a span with none out leaves the lists and is chained on
  // *to_release. REQUIRES lock_ held.
  void EndRun(Span* span, uint32_t refcount_before, uint32_t refcount, size_t returned, Span** to_release);
  // Takes span (every object free) off the lists and chains it on *to_release, its bitmap
  // given back. REQUIRES lock_ held.
  void Unlist(Span* span, Span** to_release);
  // Hands a chain of such spans to the page heap. REQUIRES lock_ not held.
  void ReleaseSpans(Span* chain);
  // InsertChunk at each object's span owner: this list's for its own spans, another
  // shard's for spans carved there (reorders chunk).
  void InsertChunkAtOwners(Pending* chunk, int k);
  // Takes up to n objects off the spans under lock_, calling sink(obj, i) for the i-th.
  template <typename Sink>
  int TakeFromSpans(int n, Sink sink);
  // Takes `take` objects (no more than it has) off a span that keeps a list, calling
  // sink(obj, got + i) for the i-th. REQUIRES lock_ held.
  template <typename Sink>
  void TakeFromList(Span* span, int take, int got, Sink sink);
  bool Populate();  // REQUIRES lock_ held; drops and re-takes it
  void StartList(Span* span);  // a new span without a bitmap: empty list, nothing carved
  [[noreturn]] TCM_NOINLINE void SpanHasNoneOut(void* obj) const;
  [[noreturn]] TCM_NOINLINE void AlreadyFreeInSpan(void* obj) const;
  void PoisonNew(void* obj);
  // Checks n objects of src before they are parked in the transfer cache (no lock held),
  // advancing src past them; a chain's objects are also copied to out[0, n) (an array
  // source's are not: out is unused).
  template <typename Source>
  void CheckObjects(Source& src, int n, void** out) const;
  // For the batch checks: crashes unless obj lies on a page of this class; returns the
  // start of obj's span (its page, for a class of one-page spans).
  TCM_ALWAYS_INLINE uintptr_t BatchSpanBase(void* obj, bool one_page) const;
  // The same checks with the duplicate filter, for batches whose runs (CheckObjects) do
  // not prove every pointer distinct.
  template <typename Source>
  void CheckObjectsFiltered(Source& src, int n, void** out) const;
  // Copies n objects of a chain to out (checked when checks are on), advancing src.
  void CollectChain(ChainSource& src, int n, void** out) const;

  // Carving cursors. CPUs that share this list (a class not sharded, or more CPUs than
  // shards) each take objects from a span of their own, its cursor, until it is used up,
  // so no cache line holds objects two CPUs took; see SpanFor. REQUIRES lock_ for reads and
  // writes; a span that leaves the list leaves every cursor (Unlist).
  static constexpr int kCursorSlots = kMaxCentralShards;
  // Spans SpanFor looks at from the list's front for a new cursor.
  static constexpr int kSpanScan = 2 * kCursorSlots + 1;
  // A CPU's slot: distinct for CPUs 0-7, and for the CPUs of one shard (cpu = shard + 8k,
  // k < 8) too. cpu < 0 (not known): slot 0.
  static int CursorSlot(int cpu) { return cpu < 0 ? 0 : (cpu ^ (cpu >> 3)) & (kCursorSlots - 1); }
  Span* cursors_[kCursorSlots] = {};
  // The span the caller's slot takes from next: its cursor while that has objects, else
  // the first span from the front that this slot took from before or nobody did, else one
  // no other slot is carving; nullptr when there is none (a new span is then populated:
  // at most one a slot beyond what an unshared list would hold). REQUIRES lock_ held.
  Span* SpanFor(int slot);

  TransferCache transfer_;  // in front of lock_: its own leaf lock
  mutable SpinLock lock_;  // mutable: PrevFreedTwice reads bits under it
  uint8_t cl_ = 0;
  uint32_t size_ = 0;
  uint32_t objects_per_span_ = 0;
  uint64_t division_magic_ = 0;  // SizeMap::kDivisionMagic: index and block-start check in one multiplication
  PageHeap* heap_ = nullptr;
  PageMap* pagemap_ = nullptr;
  SpanList nonempty_;  // spans with at least one free object
  SpanList empty_;     // spans with every object handed out
  size_t free_objects_ = 0;
  size_t num_spans_ = 0;
  bool checks_ = false;  // set by Init; a zero default keeps g_central in .bss (start-up RSS)
  bool vector_check_ = false;  // set by Init: the CPU has AVX2 (CheckObjects of arrays)
  size_t kept_reused_ = 0;  // kept spans taken back since the previous ReleaseKeptSpansBeyondDemand
  ByteBudget* kept_budget_ = nullptr;  // null: this list keeps no empty spans
  // What a kept span counts against the budget: its whole length.
  size_t KeptSpanBytes() const { return SizeMap::ClassPages(cl_) * kPageSize; }
  size_t kept_spans_ = 0;
  uint32_t bitmap_words_ = 0;
  mutable std::atomic<size_t> exact_scans_{0};
  mutable std::atomic<size_t> checked_batches_{0};
  mutable std::atomic<size_t> filtered_batches_{0};
  mutable std::atomic<size_t> vector_checked_objects_{0};
  mutable std::atomic<size_t> batches_by_runs_[kRunsCounted] = {};
  std::atomic<size_t> own_run_objects_{0};
  // WatchHandoffs' state: the previous caller's shard, the hand-offs so far, the count
  // when the current window began, and when it began. Racy by design (no lock): a lost
  // update miscounts a hand-off or delays a decision, nothing else.
  std::atomic<bool> watch_handoffs_{false};
  std::atomic<int> shard_mask_{0};
  std::atomic<int> last_shard_{0};
  std::atomic<uint32_t> handoffs_{0};
  std::atomic<uint32_t> handoffs_mark_{0};
  std::atomic<uint64_t> handoffs_since_{0};
};

// Calls f(list, cl) for every list of `lists` ([shard][class], `shards` groups of
// num_classes) that is set up, classes 1..num_classes-1: one not set up holds nothing and
// is never written.
template <typename F>
void ForEachReadyCentral(CentralFreeList* lists, int shards, size_t num_classes, F f) {
  for (size_t s = 0; s < static_cast<size_t>(shards); ++s)
    for (size_t cl = 1; cl < num_classes; ++cl)
      if (lists[s * num_classes + cl].ready()) f(lists[s * num_classes + cl], cl);
}

inline CentralFreeList& CentralOf(CentralFreeList* lists, const CentralShards* shards, int cpu, size_t cl) {
  size_t shard = 0;
  if (shards != nullptr && cpu > 0 && shards->sharded[cl].load(std::memory_order_relaxed))
    shard = static_cast<size_t>(cpu & (shards->count - 1));
  CentralFreeList& list = lists[shard * kNumClasses + cl];
  if (TCM_UNLIKELY(!list.ready())) list.SetUp();
  return list;
}

}  // namespace tcm

#endif  // TCMALLOC_CENTRAL_FREELIST_H_
