// MallocExtension (gperftools/malloc_extension.h) and its C interface, over the allocator.
// Built with exceptions and RTTI, like libc_override.cc: the public classes' vtables and
// typeinfo live here so programs can derive from SysAllocator and MallocExtension.
//
// Reporting that must not allocate (GetStats) goes through a Printer into the caller's
// buffer; the std::string/std::vector interfaces allocate only outside allocator locks.
#include "gperftools/malloc_extension.h"

#include <cstdio>
#include <cstring>
#include <new>

#include "api/allocation.h"
#include "base/spinlock.h"
#include "core/block_lookup.h"
#include "gperftools/malloc_extension_c.h"
#include "api/malloc_stats_text.h"
#include "platform/os.h"

using namespace tcm;

// ---- the base class: do-nothing defaults, as a malloc without extensions would have ----

SysAllocator::~SysAllocator() = default;
MallocExtension::~MallocExtension() = default;
void MallocExtension::Initialize() {}
bool MallocExtension::VerifyAllMemory() { return true; }
bool MallocExtension::VerifyNewMemory(const void*) { return true; }
bool MallocExtension::VerifyArrayNewMemory(const void*) { return true; }
bool MallocExtension::VerifyMallocMemory(const void*) { return true; }
bool MallocExtension::MallocMemoryStats(int*, size_t*, int*) { return false; }
void MallocExtension::GetStats(char* buffer, int length) {
  if (buffer != nullptr && length > 0) buffer[0] = '\0';
}
void MallocExtension::GetHeapSample(MallocExtensionWriter*) {}
void MallocExtension::GetHeapGrowthStacks(MallocExtensionWriter*) {}
void MallocExtension::Ranges(void*, RangeFunction) {}
bool MallocExtension::GetNumericProperty(const char*, size_t*) { return false; }
bool MallocExtension::SetNumericProperty(const char*, size_t) { return false; }
void MallocExtension::MarkThreadIdle() {}
void MallocExtension::MarkThreadBusy() {}
SysAllocator* MallocExtension::GetSystemAllocator() { return nullptr; }
void MallocExtension::SetSystemAllocator(SysAllocator*) {}
void MallocExtension::ReleaseToSystem(size_t) {}
void MallocExtension::ReleaseFreeMemory() { ReleaseToSystem(static_cast<size_t>(-1)); }
void MallocExtension::SetMemoryReleaseRate(double) {}
double MallocExtension::GetMemoryReleaseRate() { return -1.0; }
size_t MallocExtension::GetEstimatedAllocatedSize(size_t size) { return size; }
size_t MallocExtension::GetAllocatedSize(const void*) { return 0; }
MallocExtension::Ownership MallocExtension::GetOwnership(const void*) { return kUnknownOwnership; }
void MallocExtension::GetFreeListSizes(std::vector<FreeListInfo>* v) {
  if (v != nullptr) v->clear();
}
void** MallocExtension::ReadStackTraces(int* sample_period) {
  if (sample_period != nullptr) *sample_period = 0;
  return nullptr;
}
void** MallocExtension::ReadHeapGrowthStackTraces() { return nullptr; }
size_t MallocExtension::GetThreadCacheSize() { return 0; }
void MallocExtension::MarkThreadTemporarilyIdle() { MarkThreadIdle(); }

namespace {

// The built-in memory sources, offered to a program's SysAllocator as its fallback.
class BuiltinSysAllocator final : public SysAllocator {
 public:
  void* Alloc(size_t size, size_t* actual_size, size_t alignment) override {
    return g_system.AllocBuiltin(size, alignment, actual_size);
  }
};

void* CallUserAllocator(void* ctx, size_t size, size_t* actual, size_t alignment) {
  return static_cast<SysAllocator*>(ctx)->Alloc(size, actual, alignment);
}

// Appends "heap profile" text for entries {count, bytes, depth, pcs} (pprof's format).
struct ProfileEntry {
  size_t count;
  size_t bytes;
  int depth;
  void* const* pcs;
};

void AppendProfileHeader(std::string* out, size_t objs, size_t bytes, const char* label) {
  char line[160];
  snprintf(line, sizeof(line), "heap profile: %6zu: %8zu [%6zu: %8zu] @ %s\n", objs, bytes, objs, bytes, label);
  out->append(line);
}

void AppendProfileEntry(std::string* out, const ProfileEntry& e) {
  char line[64];
  snprintf(line, sizeof(line), "%6zu: %8zu [%6zu: %8zu] @", e.count, e.bytes, e.count, e.bytes);
  out->append(line);
  for (int i = 0; i < e.depth; ++i) {
    snprintf(line, sizeof(line), " %p", e.pcs[i]);
    out->append(line);
  }
  out->append("\n");
}

void AppendMappedLibraries(std::string* out) {
  out->append("\nMAPPED_LIBRARIES:\n");
  FILE* f = fopen("/proc/self/maps", "r");
  if (f == nullptr) return;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) out->append(buf, n);
  fclose(f);
}

}  // namespace

// libtcmalloc, the profiling library, records every growth's stack, as gperftools' does.
// libtcmalloc_minimal records them while heap sampling is on, when stacks are being taken
// anyway; otherwise only the size, as gperftools' minimal library always does: a program
// that never unwinds keeps no unwind tables resident for its first growth (~85 KiB, a
// twentieth of a small program's RSS).
bool tcm::GrowthStacksWanted() {
#ifdef TCM_FULL_LIBRARY
  return true;
#else
  return __atomic_load_n(&g_options.sample_parameter, __ATOMIC_RELAXED) > 0;
#endif
}

namespace {

// Copies the growth records (newest first) under the page heap lock into `out`, which has
// room for `cap` records; returns how many there are in total.
size_t CopyGrowthRecords(GrowthRecord* out, size_t cap) {
  SpinLockHolder h(g_pageheap.lock());
  size_t i = 0;
  for (const GrowthRecord* r = g_pageheap.growth_records(); r != nullptr && i < cap; r = r->next) out[i++] = *r;
  return g_pageheap.growth_record_count();
}

// Copies the live samples out of the registry into a new[]-ed array (*n of them).
SampleRecord* SnapshotSamples(size_t* n) {
  for (;;) {
    const size_t cap = g_samples.live() + 16;  // sized outside the lock: new[] allocates
    auto* recs = new SampleRecord[cap];
    const size_t live = g_samples.Snapshot(recs, cap);
    if (live <= cap) {
      *n = live;
      return recs;
    }
    delete[] recs;  // grew meanwhile; try again
  }
}

// The new[]-ed {count, size, depth, pc[depth]}... array ended by a count of 0 that
// ReadStackTraces and ReadHeapGrowthStackTraces return; each record counts as one object.
template <typename Record, typename SizeOf>
void** PackTraces(const Record* recs, size_t n, SizeOf size_of) {
  size_t words = 1;
  for (size_t i = 0; i < n; ++i) words += 3 + static_cast<size_t>(recs[i].depth);
  void** out = new void*[words];
  size_t w = 0;
  for (size_t i = 0; i < n; ++i) {
    out[w++] = reinterpret_cast<void*>(uintptr_t{1});
    out[w++] = reinterpret_cast<void*>(size_of(recs[i]));
    out[w++] = reinterpret_cast<void*>(static_cast<uintptr_t>(recs[i].depth));
    for (int d = 0; d < recs[i].depth; ++d) out[w++] = recs[i].pcs[d];
  }
  out[w] = nullptr;
  return out;
}

class TCMallocImplementation final : public MallocExtension {
 public:
  bool VerifyAllMemory() override {
    VerifyHeap();
    return true;
  }
  bool VerifyNewMemory(const void* p) override { return p == nullptr || OwnedSize(p) != 0; }
  bool VerifyArrayNewMemory(const void* p) override { return p == nullptr || OwnedSize(p) != 0; }
  bool VerifyMallocMemory(const void* p) override { return p == nullptr || OwnedSize(p) != 0; }

  bool MallocMemoryStats(int* blocks, size_t* total, int histogram[kMallocHistogramSize]) override {
    EnsureInitialized();
    ClassStats stats[kNumClasses];
    CollectClassStats(stats);
    size_t n = 0, bytes = 0;
    for (int i = 0; i < kMallocHistogramSize; ++i) histogram[i] = 0;
    auto add = [&](size_t count, size_t size) {
      if (count == 0) return;
      n += count;
      bytes += count * size;
      int bucket = 63 - __builtin_clzll(size);
      histogram[bucket < kMallocHistogramSize ? bucket : kMallocHistogramSize - 1] += static_cast<int>(count);
    };
    for (size_t cl = 1; cl < kNumClasses; ++cl) add(stats[cl].in_use_objects, SizeMap::ClassSize(cl));
    // Large objects: in-use spans that are not carved into a class.
    SpinLockHolder h(g_pageheap.lock());
    g_pageheap.ForEachSpanFrom(PageId{0}, [&](Span* s) {
      if (s->location == Span::kInUse && s->sizeclass == 0) add(1, s->length.bytes());
      return true;
    });
    *blocks = static_cast<int>(n);
    *total = bytes;
    return true;
  }

  void GetStats(char* buffer, int length) override {
    if (buffer == nullptr || length <= 0) return;
    EnsureInitialized();
    Printer out(buffer, static_cast<size_t>(length));
    PrintStats(&out, 2);
  }

  void GetHeapSample(MallocExtensionWriter* writer) override {
    // One line per live sample with its raw count and bytes; the "heap_v2/<period>" label
    // tells pprof to scale each sample by 1 / (1 - exp(-size/period)).
    EnsureInitialized();
    size_t n = 0;
    SampleRecord* recs = SnapshotSamples(&n);
    size_t bytes = 0;
    for (size_t i = 0; i < n; ++i) bytes += recs[i].requested;
    char label[64];
    snprintf(label, sizeof(label), "heap_v2/%lld", static_cast<long long>(g_options.sample_parameter));
    AppendProfileHeader(writer, n, bytes, label);
    for (size_t i = 0; i < n; ++i) AppendProfileEntry(writer, {1, recs[i].requested, recs[i].depth, recs[i].pcs});
    AppendMappedLibraries(writer);
    delete[] recs;
  }

  void GetHeapGrowthStacks(MallocExtensionWriter* writer) override {
    EnsureInitialized();
    // Size the copy outside the lock (new[] allocates), with room for a little growth.
    const size_t cap = CopyGrowthRecords(nullptr, 0) + 16;
    auto* recs = new GrowthRecord[cap];
    size_t total = CopyGrowthRecords(recs, cap);
    const size_t n = total < cap ? total : cap;
    size_t bytes = 0;
    for (size_t i = 0; i < n; ++i) bytes += recs[i].bytes;
    AppendProfileHeader(writer, n, bytes, "growth");
    for (size_t i = 0; i < n; ++i) AppendProfileEntry(writer, {1, recs[i].bytes, recs[i].depth, recs[i].pcs});
    AppendMappedLibraries(writer);
    delete[] recs;
  }

  void Ranges(void* arg, RangeFunction func) override {
    EnsureInitialized();
    // Collect a batch under the lock, report it without: func may allocate.
    constexpr size_t kBatch = 256;
    base::MallocRange batch[kBatch];
    PageId cursor{0};
    const PageId end{uintptr_t{1} << PageMap::kPageBits};
    while (cursor < end) {
      size_t n = 0;
      {
        SpinLockHolder h(g_pageheap.lock());
        cursor = g_pageheap.ForEachSpanFrom(cursor, [&](Span* s) {
          base::MallocRange& r = batch[n++];
          r.address = s->start_addr();
          r.length = s->length.bytes();
          r.fraction = 0;
          if (s->location == Span::kReturned) {
            r.type = base::MallocRange::UNMAPPED;
          } else if (s->location == Span::kNormal) {
            r.type = base::MallocRange::FREE;
          } else {
            r.type = base::MallocRange::INUSE;
            r.fraction = s->sizeclass == 0 ? 1.0
                                           : static_cast<double>(s->refcount) * SizeMap::ClassSize(s->sizeclass) /
                                                 static_cast<double>(r.length);
          }
          return n < kBatch;
        });
      }
      for (size_t i = 0; i < n; ++i) func(arg, &batch[i]);
      if (n < kBatch) break;
    }
  }

  bool GetNumericProperty(const char* name, size_t* value) override;
  bool SetNumericProperty(const char* name, size_t value) override;

  void MarkThreadIdle() override { ReleaseCallingThreadCache(true); }
  void MarkThreadBusy() override {}  // the cache is rebuilt by the next allocation

  SysAllocator* GetSystemAllocator() override {
    SysAllocator* user = user_allocator_;
    return user != nullptr ? user : &builtin_;
  }
  void SetSystemAllocator(SysAllocator* a) override {
    EnsureInitialized();
    SpinLockHolder h(g_pageheap.lock());  // no growth while the source changes
    user_allocator_ = a == &builtin_ ? nullptr : a;
    g_system.SetUserSource(user_allocator_ != nullptr ? CallUserAllocator : nullptr, user_allocator_);
  }

  void ReleaseToSystem(size_t num_bytes) override { tcm::ReleaseToSystem(num_bytes); }
  void ReleaseFreeMemory() override { tcm::ReleaseFreeMemory(); }
  void SetMemoryReleaseRate(double rate) override { g_scavenger.set_release_rate(rate); }
  double GetMemoryReleaseRate() override { return g_scavenger.release_rate(); }
  size_t GetEstimatedAllocatedSize(size_t size) override { return GoodSize(size, 0); }
  size_t GetAllocatedSize(const void* p) override {
    return p == nullptr ? 0 : UsableSize(p, "MallocExtension::GetAllocatedSize()");
  }
  Ownership GetOwnership(const void* p) override {
    // Any byte of a block counts. The lock: p need not be a live block of the caller's.
    uintptr_t start;
    size_t usable;
    if (g_guarded.FindLive(reinterpret_cast<uintptr_t>(p), &start, &usable)) return kOwned;
    SpinLockHolder h(g_pageheap.lock());
    return FindBlock(g_pagemap, reinterpret_cast<uintptr_t>(p)).found() ? kOwned : kNotOwned;
  }

  void GetFreeListSizes(std::vector<FreeListInfo>* v) override;

  void** ReadStackTraces(int* sample_period) override {
    EnsureInitialized();
    if (sample_period != nullptr) *sample_period = static_cast<int>(g_options.sample_parameter);
    size_t n = 0;
    SampleRecord* recs = SnapshotSamples(&n);
    void** out = PackTraces(recs, n, [](const SampleRecord& r) { return r.requested; });
    delete[] recs;
    return out;
  }

  void** ReadHeapGrowthStackTraces() override {
    EnsureInitialized();
    const size_t cap = CopyGrowthRecords(nullptr, 0) + 16;
    auto* recs = new GrowthRecord[cap];
    const size_t total = CopyGrowthRecords(recs, cap);
    void** out = PackTraces(recs, total < cap ? total : cap, [](const GrowthRecord& r) { return r.bytes; });
    delete[] recs;
    return out;
  }

  size_t GetThreadCacheSize() override { return CallingThreadCacheSize(); }
  void MarkThreadTemporarilyIdle() override { ReleaseCallingThreadCache(false); }

 private:
  BuiltinSysAllocator builtin_;
  SysAllocator* user_allocator_ = nullptr;
};

bool TCMallocImplementation::GetNumericProperty(const char* name, size_t* value) {
  if (name == nullptr || value == nullptr) return false;
  EnsureInitialized();
  auto is = [name](const char* n) { return strcmp(name, n) == 0; };
  // Cheap ones first: no walk over caches or classes.
  if (is("tcmalloc.max_total_thread_cache_bytes")) return *value = g_caches.max_total(), true;
  if (is("tcmalloc.min_per_thread_cache_bytes")) return *value = g_caches.min_per_thread(), true;
  if (is("tcmalloc.impl.thread_cache_count")) return *value = g_caches.count(), true;
  if (is("tcmalloc.sample_parameter")) return *value = static_cast<size_t>(g_options.sample_parameter), true;
  if (is("tcmalloc.heap_limit_mb")) return *value = g_pageheap.limit() >> 20, true;
  if (is("tcmalloc.aggressive_memory_decommit")) return *value = g_pageheap.aggressive_decommit(), true;
  if (is("tcmalloc.guarded_sample_rate"))
    return *value = static_cast<size_t>(__atomic_load_n(&g_options.guarded_sample_rate, __ATOMIC_RELAXED)), true;
  if (is("tcmalloc.guarded_allocations")) return *value = g_guarded.total_allocations(), true;
  if (is("tcmalloc.guarded_live_allocations")) return *value = g_guarded.live(), true;
  if (is("tcmalloc.guarded_resident_bytes")) return *value = g_guarded.resident_bytes(), true;
  if (is("tcmalloc.hardened")) return *value = g_options.hardened, true;
  if (is("tcmalloc.background_release")) return *value = g_scavenger.background_wanted(), true;
  if (is("tcmalloc.scavenger_passes")) return *value = g_scavenger.passes(), true;
  if (is("tcmalloc.scavenger_released_bytes")) return *value = g_scavenger.released_bytes(), true;
  if (is("tcmalloc.surplus_releases") || is("tcmalloc.surplus_held_back")) {
    SpinLockHolder h(g_pageheap.lock());
    const PageHeapStats& st = g_pageheap.stats();
    return *value = static_cast<size_t>(is("tcmalloc.surplus_releases") ? st.surplus_releases : st.surplus_skips),
           true;
  }
  if (is("tcmalloc.per_cpu_caches_active")) return *value = g_cpu_cache.active() ? 1 : 0, true;
  if (is("tcmalloc.max_per_cpu_cache_size")) return *value = g_cpu_cache.max_bytes_per_cpu(), true;
  if (is("tcmalloc.cpu_free")) return *value = g_cpu_cache.TotalBytes(), true;
  if (is("tcmalloc.central_shards")) return *value = static_cast<size_t>(g_central_shards.count), true;
  if (is("tcmalloc.sharded_classes")) return *value = ShardedClasses(), true;
  if (is("tcmalloc.batch_check_batches") || is("tcmalloc.batch_check_filtered_batches")) {
    const bool filtered = is("tcmalloc.batch_check_filtered_batches");
    size_t sum = 0;
    ForEachCentral([&](const CentralFreeList& c, size_t) { sum += filtered ? c.filtered_batches() : c.checked_batches(); });
    return *value = sum, true;
  }
  if (strncmp(name, "tcmalloc.hugepage_", 18) == 0) {
    const HugePageSnapshot snap = TakeHugePageSnapshot();
    const HugePageStats& h = snap.pages;
    const PageHeapStats& ps = snap.heap;
    const bool aware = snap.aware;
    if (is("tcmalloc.hugepage_aware")) return *value = aware ? 1 : 0, true;
    if (is("tcmalloc.hugepage_bytes")) return *value = h.owned * kHugePageSize, true;
    if (is("tcmalloc.hugepage_advised_bytes")) return *value = h.advised * kHugePageSize, true;
    if (is("tcmalloc.hugepage_intact_bytes")) return *value = h.intact_bytes, true;
    if (is("tcmalloc.hugepage_full")) return *value = h.full, true;
    if (is("tcmalloc.hugepage_partial")) return *value = h.partial, true;
    if (is("tcmalloc.hugepage_empty")) return *value = h.empty, true;
    if (is("tcmalloc.hugepage_released")) return *value = h.released, true;
    if (is("tcmalloc.hugepage_partly_released")) return *value = h.partly_released, true;
    if (is("tcmalloc.hugepage_partial_free_bytes")) return *value = h.partial_free_bytes, true;
    if (is("tcmalloc.hugepage_empty_free_bytes")) return *value = h.empty * kHugePageSize, true;
    if (is("tcmalloc.hugepage_broken_free_bytes")) return *value = h.broken_free_bytes, true;
    if (is("tcmalloc.hugepage_broken_released_bytes")) return *value = h.broken_released_bytes, true;
    if (is("tcmalloc.hugepage_released_total")) return *value = ps.hugepages_released, true;
    if (is("tcmalloc.hugepage_subreleased_bytes_total")) return *value = ps.subreleased_bytes_total, true;
    if (is("tcmalloc.hugepage_collapsed_bytes_total")) return *value = snap.collapsed_bytes, true;
    if (is("tcmalloc.hugepage_collapse_credit_bytes")) return *value = snap.collapse_credit, true;
    return false;
  }
  const HeapTotals t = ComputeTotals();
  if (is("generic.current_allocated_bytes")) return *value = t.in_use_bytes, true;
  if (is("generic.heap_size")) return *value = t.system_bytes, true;
  if (is("generic.total_physical_bytes"))
    return *value = t.system_bytes + t.metadata_bytes - t.unmapped_bytes, true;
  if (is("tcmalloc.pageheap_free_bytes")) return *value = t.pageheap_free_bytes, true;
  if (is("tcmalloc.pageheap_unmapped_bytes")) return *value = t.unmapped_bytes, true;
  if (is("tcmalloc.slack_bytes")) return *value = t.pageheap_free_bytes + t.unmapped_bytes, true;
  if (is("tcmalloc.central_cache_free_bytes")) return *value = t.central_free_bytes, true;
  if (is("tcmalloc.transfer_cache_free_bytes")) return *value = t.transfer_cache_bytes, true;
  if (is("tcmalloc.thread_cache_free_bytes")) return *value = t.thread_cache_bytes, true;
  // The front end's bytes in either mode (per-CPU caches included), as the issue of
  // bounded front-end memory is about both.
  if (is("tcmalloc.current_total_thread_cache_bytes")) return *value = t.thread_cache_bytes + t.cpu_cache_bytes, true;
  if (is("tcmalloc.metadata_bytes")) return *value = t.metadata_bytes, true;
  return false;
}

bool TCMallocImplementation::SetNumericProperty(const char* name, size_t value) {
  if (name == nullptr) return false;
  EnsureInitialized();
  auto is = [name](const char* n) { return strcmp(name, n) == 0; };
  if (is("tcmalloc.max_total_thread_cache_bytes")) {
    // Same clamp as the environment flag: at most 1 GiB.
    g_caches.SetMaxTotal(value > (size_t{1} << 30) ? size_t{1} << 30 : value);
    return true;
  }
  if (is("tcmalloc.min_per_thread_cache_bytes")) {
    g_caches.set_min_per_thread(value);
    return true;
  }
  if (is("tcmalloc.max_per_cpu_cache_size")) {
    // Takes effect as capacities grow and as maintenance shrinks them.
    g_cpu_cache.set_max_bytes_per_cpu(value > (size_t{1} << 30) ? size_t{1} << 30 : value);
    return true;
  }
  if (is("tcmalloc.sample_parameter")) {
    g_options.sample_parameter = static_cast<int64_t>(value);
    return true;
  }
  if (is("tcmalloc.guarded_sample_rate")) {
    // Threads pick the new rate up when their countdown next runs out.
    const size_t max = size_t{1} << 50;
    __atomic_store_n(&g_options.guarded_sample_rate, static_cast<int64_t>(value > max ? max : value),
                     __ATOMIC_RELAXED);
    return true;
  }
  if (is("tcmalloc.heap_limit_mb")) {
    SpinLockHolder h(g_pageheap.lock());
    g_pageheap.set_limit(value << 20);
    return true;
  }
  if (is("tcmalloc.aggressive_memory_decommit")) {
    SpinLockHolder h(g_pageheap.lock());
    g_pageheap.set_aggressive_decommit(value != 0);
    return true;
  }
  if (is("tcmalloc.background_release")) {
    // Starts the thread now, not at the next slow path: a quiet program may never reach one.
    if (value == 0) {
      g_scavenger.StopBackgroundThread();
      return true;
    }
    g_scavenger.StartBackgroundThread();
    return g_scavenger.background_running();
  }
  return false;
}

void TCMallocImplementation::GetFreeListSizes(std::vector<FreeListInfo>* v) {
  if (v == nullptr) return;
  v->clear();
  EnsureInitialized();
  ClassStats stats[kNumClasses];
  CollectClassStats(stats);
  size_t prev = 0;
  for (size_t cl = 1; cl < kNumClasses; ++cl) {
    size_t sz = SizeMap::ClassSize(cl);
    v->push_back({prev + 1, sz, stats[cl].central_free * sz, "tcmalloc.central"});
    v->push_back({prev + 1, sz, stats[cl].transfer_free * sz, "tcmalloc.transfer"});
    v->push_back({prev + 1, sz, stats[cl].thread_free * sz, "tcmalloc.thread"});
    prev = sz;
  }
  size_t normal[kMaxPages + 1] = {}, returned[kMaxPages + 1] = {};
  {
    SpinLockHolder h(g_pageheap.lock());
    g_pageheap.ForEachFreeSpan([&](Span* s) {
      size_t i = s->length.n < kMaxPages ? s->length.n : kMaxPages;
      (s->location == Span::kReturned ? returned : normal)[i] += s->length.bytes();
    });
  }
  for (size_t i = 1; i < kMaxPages; ++i) {
    v->push_back({i << kPageShift, i << kPageShift, normal[i], "tcmalloc.page"});
    v->push_back({i << kPageShift, i << kPageShift, returned[i], "tcmalloc.page_unmapped"});
  }
  v->push_back({kMaxPages << kPageShift, static_cast<size_t>(INT64_MAX), normal[kMaxPages], "tcmalloc.large"});
  v->push_back({kMaxPages << kPageShift, static_cast<size_t>(INT64_MAX), returned[kMaxPages], "tcmalloc.large_unmapped"});
}

// Storage for the default implementation: constructed on first use, never destroyed (it
// must outlive every static destructor that might still call into it).
alignas(TCMallocImplementation) unsigned char g_impl_storage[sizeof(TCMallocImplementation)];
std::atomic<MallocExtension*> g_current{nullptr};

// Built once, by whoever asks first. No function-local static: its guard would come from the
// C++ runtime, which the library references only weakly (see src/CMakeLists.txt).
std::atomic<TCMallocImplementation*> g_default{nullptr};
SpinLock g_default_lock;

MallocExtension* DefaultImplementation() {
  TCMallocImplementation* impl = g_default.load(std::memory_order_acquire);
  if (impl != nullptr) return impl;
  SpinLockHolder h(&g_default_lock);
  impl = g_default.load(std::memory_order_relaxed);
  if (impl == nullptr) {
    impl = new (g_impl_storage) TCMallocImplementation();
    g_default.store(impl, std::memory_order_release);
  }
  return impl;
}

}  // namespace

MallocExtension* MallocExtension::instance() {
  MallocExtension* cur = g_current.load(std::memory_order_acquire);
  return cur != nullptr ? cur : DefaultImplementation();
}

size_t MallocExtension::ProcessBackgroundActions() {
  EnsureInitialized();
  return g_scavenger.RunNow();
}

void MallocExtension::Register(MallocExtension* implementation) {
  if (implementation != nullptr) g_current.store(implementation, std::memory_order_release);
}

// ---- C interface ----

extern "C" {
#define TCM_C_BOOL(expr) return (expr) ? 1 : 0
TCM_EXPORT int MallocExtension_VerifyAllMemory(void) { TCM_C_BOOL(MallocExtension::instance()->VerifyAllMemory()); }
TCM_EXPORT int MallocExtension_VerifyNewMemory(const void* p) {
  TCM_C_BOOL(MallocExtension::instance()->VerifyNewMemory(p));
}
TCM_EXPORT int MallocExtension_VerifyArrayNewMemory(const void* p) {
  TCM_C_BOOL(MallocExtension::instance()->VerifyArrayNewMemory(p));
}
TCM_EXPORT int MallocExtension_VerifyMallocMemory(const void* p) {
  TCM_C_BOOL(MallocExtension::instance()->VerifyMallocMemory(p));
}
TCM_EXPORT int MallocExtension_MallocMemoryStats(int* blocks, size_t* total, int histogram[kMallocExtensionHistogramSize]) {
  TCM_C_BOOL(MallocExtension::instance()->MallocMemoryStats(blocks, total, histogram));
}
TCM_EXPORT void MallocExtension_GetStats(char* buffer, int buffer_length) {
  MallocExtension::instance()->GetStats(buffer, buffer_length);
}
TCM_EXPORT int MallocExtension_GetNumericProperty(const char* property, size_t* value) {
  TCM_C_BOOL(MallocExtension::instance()->GetNumericProperty(property, value));
}
TCM_EXPORT int MallocExtension_SetNumericProperty(const char* property, size_t value) {
  TCM_C_BOOL(MallocExtension::instance()->SetNumericProperty(property, value));
}
TCM_EXPORT void MallocExtension_MarkThreadIdle(void) { MallocExtension::instance()->MarkThreadIdle(); }
TCM_EXPORT void MallocExtension_MarkThreadBusy(void) { MallocExtension::instance()->MarkThreadBusy(); }
TCM_EXPORT void MallocExtension_ReleaseToSystem(size_t num_bytes) {
  MallocExtension::instance()->ReleaseToSystem(num_bytes);
}
TCM_EXPORT void MallocExtension_ReleaseFreeMemory(void) { MallocExtension::instance()->ReleaseFreeMemory(); }
TCM_EXPORT void MallocExtension_SetMemoryReleaseRate(double rate) {
  MallocExtension::instance()->SetMemoryReleaseRate(rate);
}
TCM_EXPORT double MallocExtension_GetMemoryReleaseRate(void) {
  return MallocExtension::instance()->GetMemoryReleaseRate();
}
TCM_EXPORT size_t MallocExtension_GetEstimatedAllocatedSize(size_t size) {
  return MallocExtension::instance()->GetEstimatedAllocatedSize(size);
}
TCM_EXPORT size_t MallocExtension_GetAllocatedSize(const void* p) {
  return MallocExtension::instance()->GetAllocatedSize(p);
}
TCM_EXPORT size_t MallocExtension_GetThreadCacheSize(void) { return MallocExtension::instance()->GetThreadCacheSize(); }
TCM_EXPORT void MallocExtension_MarkThreadTemporarilyIdle(void) {
  MallocExtension::instance()->MarkThreadTemporarilyIdle();
}
TCM_EXPORT size_t MallocExtension_ProcessBackgroundActions(void) { return MallocExtension::ProcessBackgroundActions(); }
TCM_EXPORT MallocExtension_Ownership MallocExtension_GetOwnership(const void* p) {
  return static_cast<MallocExtension_Ownership>(MallocExtension::instance()->GetOwnership(p));
}
}  // extern "C"

// MALLOCSTATS=<level>: print the report when the program ends. A destructor of the
// library rather than atexit(): registering with atexit could allocate during start-up.
__attribute__((destructor)) static void PrintStatsAtExit() {
  int level = static_cast<int>(g_options.mallocstats);
  if (level <= 0) return;
  static char buf[64 * 1024];
  Printer out(buf, sizeof(buf));
  PrintStats(&out, level);
  os::WriteStderr(buf, out.written());
}
