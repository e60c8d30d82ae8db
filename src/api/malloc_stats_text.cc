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
  size_t thread_counts[kNumClasses] = {};
  g_caches.AddListLengths(thread_counts);
  // The "thread" column is the front end: thread caches or CPU caches, whichever runs.
  if (g_cpu_cache.active())
    for (size_t cl = 1; cl < kNumClasses; ++cl) thread_counts[cl] += g_cpu_cache.ClassObjects(cl);
  for (size_t cl = 1; cl < kNumClasses; ++cl) {
    ClassStats& c = out[cl];
    c.spans = g_central[cl].num_spans();
    c.central_free = g_central[cl].free_objects();
    c.transfer_free = g_central[cl].transfer_objects();
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
  out->Printf("MALLOC:   %12zu              Tcmalloc page size\n", kPageSize);
  out->Printf("MALLOC:   %12.1f%%             Overhead (everything but bytes in use, of physical)\n",
              physical == 0 ? 0.0 : 100.0 * static_cast<double>(overhead) / static_cast<double>(physical));
  out->Printf("------------------------------------------------\n");
  out->Printf("Call ReleaseFreeMemory() to release freelist memory to the OS (via madvise()).\n");
  out->Printf("Bytes released to the OS take up virtual address space but no physical memory.\n");
}

static void PrintClassTable(Printer* out) {
  ClassStats stats[kNumClasses];
  CollectClassStats(stats);
  out->Printf("------------------------------------------------\n");
  out->Printf("Size classes: objects in use, bytes free per tier (thread / transfer / central), spans, batch\n");
  out->Printf("------------------------------------------------\n");
  out->Printf("class %8s %12s %12s %12s %12s %8s %6s\n", "size", "in use", "thread", "transfer", "central", "spans",
              "batch");
  for (size_t cl = 1; cl < kNumClasses; ++cl) {
    const ClassStats& c = stats[cl];
    if (c.spans == 0 && c.thread_free == 0) continue;
    size_t sz = SizeMap::ClassSize(cl);
    out->Printf("%5zu %8zu %12zu %12zu %12zu %12zu %8zu %6zu\n", cl, sz, c.in_use_objects, c.thread_free * sz,
                c.transfer_free * sz, c.central_free * sz, c.spans, SizeMap::NumToMove(cl));
  }
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

void PrintStats(Printer* out, int level) {
  PrintHeapSummary(out, ComputeTotals());
  if (level >= 2) {
    PrintClassTable(out);
    PrintPageHeapTable(out);
  }
}

}  // namespace tcm
