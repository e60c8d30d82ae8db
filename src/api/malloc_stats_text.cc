#include "api/malloc_stats_text.h"

#include <cstring>

#include "api/globals.h"

namespace tcm {

static double ToMiB(size_t bytes) { return static_cast<double>(bytes) / 1048576.0; }

static void Line(Printer* out, char op, size_t bytes, const char* what) {
  out->Printf("MALLOC: %c %12zu (%7.1f MiB) %s\n", op, bytes, ToMiB(bytes), what);
}

void CollectClassStats(ClassStats* out) {
  memset(static_cast<void*>(out), 0, sizeof(ClassStats) * kNumClasses);
  // A maintenance pass (the background thread's, another thread's tick) would move objects
  // from the front end to their spans between the two looks below.
  SpinLockHolder no_pass(g_scavenger.pass_lock());
  size_t thread_counts[kNumClasses] = {};
  g_caches.AddListLengths(thread_counts);
  // The "thread" column is the front end: thread caches or CPU caches, whichever runs.
  if (g_cpu_cache.active())
    for (size_t cl = 1; cl < kNumClasses; ++cl) thread_counts[cl] += g_cpu_cache.ClassObjects(cl);
  ForEachCentral([out](const CentralFreeList& central, size_t cl) {
    out[cl].spans += central.num_spans();
    out[cl].central_free += central.free_objects();
    out[cl].transfer_free += central.transfer_objects();
  });
  for (size_t cl = 1; cl < kNumClasses; ++cl) {
    ClassStats& c = out[cl];
    c.thread_free = thread_counts[cl];
    size_t total = c.spans * SizeMap::ObjectsPerSpan(cl);
    size_t free_objs = c.central_free + c.transfer_free + c.thread_free;
    c.in_use_objects = total > free_objs ? total - free_objs : 0;
  }
}

void PrintHeapSummary(Printer* out, const HeapTotals& t) {
  const size_t physical = t.in_use_bytes + t.pageheap_free_bytes + t.central_free_bytes +
                          t.transfer_cache_bytes + t.thread_cache_bytes + t.cpu_cache_bytes + t.metadata_bytes;
  const size_t overhead = physical - t.in_use_bytes;
  out->Printf("------------------------------------------------\n");
  Line(out, ' ', t.in_use_bytes, "Bytes in use by application");
  Line(out, '+', t.pageheap_free_bytes, "Bytes in page heap freelist");
  Line(out, '+', t.central_free_bytes, "Bytes in central cache freelist");
  Line(out, '+', t.transfer_cache_bytes, "Bytes in transfer cache freelist");
  Line(out, '+', t.thread_cache_bytes, "Bytes in thread cache freelists");
  Line(out, '+', t.cpu_cache_bytes, "Bytes in per-CPU cache freelists");
  Line(out, '+', t.metadata_bytes, "Bytes in malloc metadata");
  out->Printf("MALLOC:   ------------\n");
  Line(out, '=', physical, "Actual memory used (physical + swap)");
  Line(out, '+', t.unmapped_bytes, "Bytes released to OS (aka unmapped)");
  out->Printf("MALLOC:   ------------\n");
  Line(out, '=', physical + t.unmapped_bytes, "Virtual address space used");
  out->Printf("MALLOC:\n");
  out->Printf("MALLOC:   %12zu              Spans in use\n", t.in_use_spans);
  out->Printf("MALLOC:   %12zu              Thread heaps in use\n", t.thread_caches);
  if (g_cpu_cache.active()) {
    out->Printf("MALLOC:   %12d              CPU caches (per-CPU mode, rseq; %zu bytes each at most)\n",
                g_cpu_cache.num_cpus(), g_cpu_cache.max_bytes_per_cpu());
  } else {
    out->Printf("MALLOC:                             Per-thread cache mode (per-CPU caches off or unsupported)\n");
  }
  // Lists are set up on first use (globals.cc): a shard is in use once one of its is.
  int shards_in_use = 0;
  for (int s = 0; s < g_central_shards.count; ++s) {
    bool any = false;
    for (size_t cl = 1; cl < kNumClasses && !any; ++cl) any = g_central[static_cast<size_t>(s) * kNumClasses + cl].ready();
    shards_in_use += any;
  }
  out->Printf("MALLOC:   %12d              Central-list shards (%d in use; CPU n uses shard n mod %d for the %zu "
              "sharded classes)\n",
              g_central_shards.count, shards_in_use, g_central_shards.count, ShardedClasses());
  // Part of the central cache freelist above: empty spans the lists keep for their next
  // allocations (central_freelist.h, "Kept spans").
  size_t kept_spans = 0;
  ForEachCentral([&kept_spans](const CentralFreeList& c, size_t) { kept_spans += c.kept_spans(); });
  out->Printf("MALLOC:   %12zu              Empty spans kept by central lists (%.1f of %.1f MiB)\n", kept_spans,
              ToMiB(g_kept_spans.used()), ToMiB(g_kept_spans.limit()));
  // The hardening's batch check (central_freelist.h): batches proven free of duplicates by
  // their runs, those that needed the filter, and how many runs they split into.
  size_t checked = 0, filtered = 0, by_runs[CentralFreeList::kRunsCounted] = {};
  ForEachCentral([&](const CentralFreeList& c, size_t) {
    checked += c.checked_batches();
    filtered += c.filtered_batches();
    for (int i = 0; i < CentralFreeList::kRunsCounted; ++i) by_runs[i] += c.batches_with_runs(i);
  });
  static_assert(CentralFreeList::kRunsCounted == 5, "the line below names five counts");
  out->Printf("MALLOC:   %12zu              Batches checked (%zu through the duplicate filter; in 1/2/3/4/5+ runs: "
              "%zu/%zu/%zu/%zu/%zu)\n",
              checked, filtered, by_runs[0], by_runs[1], by_runs[2], by_runs[3], by_runs[4]);
  out->Printf("MALLOC:   %12zu              Tcmalloc page size\n", kPageSize);
  out->Printf("MALLOC:   %12.1f%%             Overhead (everything but bytes in use, of physical)\n",
              physical == 0 ? 0.0 : 100.0 * static_cast<double>(overhead) / static_cast<double>(physical));
  out->Printf("------------------------------------------------\n");
  out->Printf("Call ReleaseFreeMemory() to release freelist memory to the OS (via madvise()).\n");
  out->Printf("Bytes released to the OS take up virtual address space but no physical memory.\n");
}

// Where each class's memory goes: the bytes its spans hold, the share the program uses, and
// the rest by where it sits (thread caches, transfer cache, central list, span tails that
// hold no whole object). frag% = everything but the program's bytes, of the span bytes:
// a class with a high frag% and many span MiB is where the overhead is (objects freed but
// caches full, or spans pinned by a few live objects).
static void PrintClassTable(Printer* out) {
  ClassStats stats[kNumClasses];
  CollectClassStats(stats);
  out->Printf("------------------------------------------------\n");
  out->Printf("Size classes: objects in use of span capacity; MiB in spans, in use, and free per tier;\n");
  out->Printf("frag%% = (span bytes - bytes in use) / span bytes\n");
  out->Printf("------------------------------------------------\n");
  out->Printf("class   size pages   in use objs   capacity   span MiB  in use MiB  thread MiB  xfer MiB  central MiB"
              "  tail MiB  frag%%  spans  batch\n");
  size_t tot_span = 0, tot_used = 0, tot_thread = 0, tot_xfer = 0, tot_central = 0, tot_tail = 0, tot_spans = 0;
  for (size_t cl = 1; cl < kNumClasses; ++cl) {
    const ClassStats& c = stats[cl];
    if (c.spans == 0 && c.thread_free == 0) continue;
    const size_t sz = SizeMap::ClassSize(cl);
    const size_t per_span = SizeMap::ObjectsPerSpan(cl);
    const size_t span_bytes = c.spans * SizeMap::ClassPages(cl) * kPageSize;
    const size_t tail = span_bytes - c.spans * per_span * sz;
    const size_t used = c.in_use_objects * sz;
    const double frag = span_bytes == 0 ? 0.0 : 100.0 * static_cast<double>(span_bytes - used) / static_cast<double>(span_bytes);
    out->Printf("%5zu %6zu %5zu %13zu %10zu %10.2f %11.2f %11.2f %9.2f %12.2f %9.2f %6.1f %6zu %6zu\n", cl, sz,
                SizeMap::ClassPages(cl), c.in_use_objects, c.spans * per_span, ToMiB(span_bytes), ToMiB(used),
                ToMiB(c.thread_free * sz), ToMiB(c.transfer_free * sz), ToMiB(c.central_free * sz), ToMiB(tail), frag,
                c.spans, SizeMap::NumToMove(cl));
    tot_span += span_bytes;
    tot_used += used;
    tot_thread += c.thread_free * sz;
    tot_xfer += c.transfer_free * sz;
    tot_central += c.central_free * sz;
    tot_tail += tail;
    tot_spans += c.spans;
  }
  const double frag =
      tot_span == 0 ? 0.0 : 100.0 * static_cast<double>(tot_span - tot_used) / static_cast<double>(tot_span);
  out->Printf("total                                       %10.2f %11.2f %11.2f %9.2f %12.2f %9.2f %6.1f %6zu\n",
              ToMiB(tot_span), ToMiB(tot_used), ToMiB(tot_thread), ToMiB(tot_xfer), ToMiB(tot_central), ToMiB(tot_tail),
              frag, tot_spans);
}

static void PrintPageHeapTable(Printer* out) {
  // Free runs by length: exact for 1..127 pages, one row for the large ones.
  size_t normal[kMaxPages + 1] = {}, returned[kMaxPages + 1] = {};
  size_t normal_pages[kMaxPages + 1] = {}, returned_pages[kMaxPages + 1] = {};
  {
    SpinLockHolder h(g_pageheap.lock());
    g_pageheap.ForEachFreeSpan([&](Span* s) {
      size_t i = s->length.n < kMaxPages ? s->length.n : kMaxPages;
      bool ret = s->location == Span::kReturned;
      ++(ret ? returned : normal)[i];
      (ret ? returned_pages : normal_pages)[i] += s->length.n;
    });
  }
  out->Printf("------------------------------------------------\n");
  out->Printf("Page heap free runs (pages of %zu bytes): count mapped, count unmapped, MiB mapped, MiB unmapped\n",
              kPageSize);
  out->Printf("------------------------------------------------\n");
  for (size_t i = 1; i <= kMaxPages; ++i) {
    if (normal[i] == 0 && returned[i] == 0) continue;
    out->Printf("%s%4zu pages: %6zu %6zu %10.1f %10.1f\n", i == kMaxPages ? ">=" : "  ", i, normal[i], returned[i],
                ToMiB(normal_pages[i] << kPageShift), ToMiB(returned_pages[i] << kPageShift));
  }
  out->Printf("------------------------------------------------\n");
  out->Printf("Memory sources (bytes obtained):");
  for (int s = 0; s < SystemAllocator::kNumSources; ++s) {
    auto src = static_cast<SystemAllocator::Source>(s);
    out->Printf(" %s %zu", SystemAllocator::SourceName(src), g_system.bytes_from(src));
  }
  out->Printf("\n");
}

MetadataResidency MeasureMetadata() {
  MetadataResidency m;
  g_arena.ForEachChunk(
      [](uintptr_t lo, uintptr_t hi, void* ctx) {
        auto* r = static_cast<MetadataResidency*>(ctx);
        r->mapped += hi - lo;
        r->resident += os::ResidentBytes(lo, hi - lo);
      },
      &m);
  g_pagemap.ForEachClassLeaf([&m](uintptr_t start, size_t bytes) {
    m.class_map_mapped += bytes;
    m.class_map_resident += os::ResidentBytes(start, bytes);
  });
  return m;
}

static void PrintMaintenance(Printer* out) {
  uint64_t surplus_releases, surplus_skips;
  size_t released_total;
  PageHeap::RecordTotals records;
  {
    SpinLockHolder h(g_pageheap.lock());
    surplus_releases = g_pageheap.stats().surplus_releases;
    surplus_skips = g_pageheap.stats().surplus_skips;
    released_total = g_pageheap.stats().released_bytes_total;
    records = g_pageheap.record_totals();
  }
  out->Printf("Maintenance: %llu passes (%.1f MiB released idle), %llu surplus releases (%llu held back:"
              " the program was cycling), %.1f MiB released in all; background thread %s\n",
              static_cast<unsigned long long>(g_scavenger.passes()), ToMiB(g_scavenger.released_bytes()),
              static_cast<unsigned long long>(surplus_releases), static_cast<unsigned long long>(surplus_skips),
              ToMiB(released_total),
              g_scavenger.background_running() ? "running" : "off");
  out->Printf("Span records: %zu in use, %zu bitmaps; %.1f KiB of their pages backed, %.1f KiB released in all\n",
              records.span_records, records.bitmaps, static_cast<double>(records.backed_bytes) / 1024.0,
              static_cast<double>(records.released_bytes) / 1024.0);
  // "Bytes in malloc metadata" counts what metadata may touch (per-CPU slabs, transfer
  // cache arrays and the class map are reserved whole and written as they are used); what
  // it holds in memory is told by the kernel.
  MetadataResidency m = MeasureMetadata();
  out->Printf("Metadata mappings: %zu KiB resident of %zu KiB mapped (mincore); the class map's leaves %zu KiB of %zu KiB\n",
              (m.resident + m.class_map_resident) >> 10, (m.mapped + m.class_map_mapped) >> 10,
              m.class_map_resident >> 10, m.class_map_mapped >> 10);
}

// The hugepage-aware page heap's view of its huge pages (2 MiB): how they are used, how much
// is free in each kind, and how many were broken by releasing part of them.
HugePageSnapshot TakeHugePageSnapshot() {
  HugePageSnapshot snap;
  SpinLockHolder l(g_pageheap.lock());
  snap.aware = g_pageheap.hugepage_aware();
  if (snap.aware) snap.pages = g_pageheap.CollectHugePageStats();
  snap.heap = g_pageheap.stats();
  snap.collapse_credit = g_pageheap.collapse_credit();
  snap.collapsed_bytes = g_system.collapsed_bytes();
  return snap;
}

static void PrintHugePages(Printer* out) {
  const HugePageSnapshot snap = TakeHugePageSnapshot();
  const HugePageStats& h = snap.pages;
  const PageHeapStats& ps = snap.heap;
  if (!snap.aware) {
    out->Printf("Huge pages: hugepage-aware page heap off (TCMALLOC_HUGEPAGES=0, THP unavailable, or memfs/devmem)\n");
    return;
  }
  out->Printf("Huge pages (2 MiB): %zu in the heap, %zu advised MADV_HUGEPAGE (%.1f MiB intact and advised);"
              " %zu full, %zu partial, %zu empty, %zu released whole, %zu partly released\n",
              h.owned, h.advised, ToMiB(h.intact_bytes), h.full, h.partial, h.empty, h.released, h.partly_released);
  out->Printf("Huge pages free: %.1f MiB in partial ones, %.1f MiB in empty ones, %.1f MiB free + %.1f MiB released"
              " in partly released ones; released ever: %llu whole, %.1f MiB from inside partly used ones\n",
              ToMiB(h.partial_free_bytes), ToMiB(h.empty * kHugePageSize), ToMiB(h.broken_free_bytes),
              ToMiB(h.broken_released_bytes), static_cast<unsigned long long>(ps.hugepages_released),
              ToMiB(ps.subreleased_bytes_total));
  out->Printf("Huge pages collapsed (MADV_COLLAPSE of units faulted in before the heap was advised): %.1f MiB;"
              " %.1f MiB more may be collapsed by passes inside the program's calls (half its growth past"
              " the threshold), the rest by ProcessBackgroundActions or the background thread\n",
              ToMiB(snap.collapsed_bytes), ToMiB(snap.collapse_credit));
}

void PrintStats(Printer* out, int level) {
  PrintHeapSummary(out, ComputeTotals());
  PrintMaintenance(out);
  PrintHugePages(out);
  if (level >= 2) {
    PrintClassTable(out);
    PrintPageHeapTable(out);
  }
}

}  // namespace tcm
