// The liveness flood (see heap_check_scan.h for what counts as a root and why).
//
// Range lists are kept sorted and merged, with hidden ends, and combined with subtract and
// intersect; every address the scan stores in its own memory is hidden, because that
// memory is itself anonymous writable memory, i.e. a root candidate.
#include "heapcheck/heap_check_scan.h"

#include <algorithm>

#include "api/introspection.h"
#include "platform/os.h"
#include "platform/threads.h"

namespace tcm::heapcheck {

namespace {

constexpr uintptr_t kRedZone = 128;  // x86-64 leaf functions may use this much below %rsp
constexpr size_t kPage = 4096;
constexpr size_t kCopyChunk = 64 * 1024;

void Normalize(MappedArray<Range>* list) {
  Range* b = list->begin();
  Range* e = list->end();
  std::sort(b, e, [](const Range& x, const Range& y) { return x.lo < y.lo; });
  size_t out = 0;
  for (Range* r = b; r != e; ++r) {
    if (r->lo >= r->hi) continue;
    if (out > 0 && r->lo <= (*list)[out - 1].hi) {
      if (r->hi > (*list)[out - 1].hi) (*list)[out - 1].hi = r->hi;
    } else {
      (*list)[out++] = *r;
    }
  }
  list->Resize(out);
}

// out = a - b, for normalized a and b.
void Subtract(const MappedArray<Range>& a, const MappedArray<Range>& b, MappedArray<Range>* out) {
  out->Clear();
  size_t j = 0;
  for (const Range& r : a) {
    uintptr_t lo = r.lo;
    while (j < b.size() && b[j].hi <= lo) ++j;
    size_t k = j;
    while (lo < r.hi) {
      if (k >= b.size() || b[k].lo >= r.hi) {
        out->Push(Range{lo, r.hi});
        break;
      }
      if (b[k].lo > lo) out->Push(Range{lo, b[k].lo});
      if (b[k].hi > lo) lo = b[k].hi;
      ++k;
    }
  }
}

// out = a ∩ b, for normalized a and b.
void Intersect(const MappedArray<Range>& a, const MappedArray<Range>& b, MappedArray<Range>* out) {
  out->Clear();
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const uintptr_t lo = std::max(a[i].lo, b[j].lo);
    const uintptr_t hi = std::min(a[i].hi, b[j].hi);
    if (lo < hi) out->Push(Range{lo, hi});
    if (a[i].hi < b[j].hi) ++i; else ++j;
  }
}

void Append(MappedArray<Range>* dst, const MappedArray<Range>& src) {
  for (size_t i = 0; i < src.size(); ++i) dst->Push(src[i]);
}

void AddRevealed(MappedArray<Range>* list, uintptr_t lo, uintptr_t hi) {
  if (lo < hi) list->Push(Range{Hide(lo), Hide(hi)});
}

// The allocator's own globals: transfer-cache slots keep stale pointers to objects that
// have since been handed out again, and none of this is program data.
uintptr_t ParseHex(const char** s) {
  uintptr_t v = 0;
  const char* p = *s;
  for (;; ++p) {
    int d;
    if (*p >= '0' && *p <= '9') d = *p - '0';
    else if (*p >= 'a' && *p <= 'f') d = *p - 'a' + 10;
    else break;
    v = v * 16 + static_cast<uintptr_t>(d);
  }
  *s = p;
  return v;
}

}  // namespace

bool LivenessScan::Build(AllocTable* table) {
  objects_.Clear();
  if (!objects_.Reserve(table->count() + 1) || !worklist_.Reserve(table->count() + 1)) return false;
  table->ForEach([&](AllocRecord* r) {
    const uintptr_t a = Reveal(r->key);
    // The usable size, not the requested one: realloc may have grown the block in place
    // without telling the hooks, and the program may have stored pointers up to its end.
    const introspection::HeapBlock block = introspection::FindHeapBlockWhileLocked(a);
    if (block.start != a) return;  // not a live block: never read it
    const size_t usable = block.size;
    objects_.Push(ScanObject{r->key, Hide(a + usable), r, false, false});
  });
  std::sort(objects_.begin(), objects_.end(),
            [](const ScanObject& x, const ScanObject& y) { return x.start < y.start; });
  min_start_ = objects_.empty() ? 0 : Reveal(objects_[0].start);
  max_end_ = 0;
  for (const ScanObject& o : objects_) max_end_ = std::max(max_end_, Reveal(o.end));
  return true;
}

bool LivenessScan::GatherMemoryMap() {
  MappedArray<char> text;
  if (!ReadWholeFile("/proc/self/maps", &text)) return false;
  maps_.Clear();
  // "lo-hi perms offset dev inode   path"
  for (const char* p = text.data(); *p;) {
    MapEntry e{};
    const uintptr_t lo = ParseHex(&p);
    if (*p == '-') ++p;
    const uintptr_t hi = ParseHex(&p);
    while (*p == ' ') ++p;
    e.readable = p[0] == 'r';
    e.writable = p[1] == 'w';
    e.shared = p[3] == 's';
    e.guard = p[0] == '-' && p[1] == '-' && p[2] == '-';
    while (*p && *p != ' ') ++p;
    // offset, dev, inode
    for (int field = 0; field < 3; ++field) {
      while (*p == ' ') ++p;
      if (field == 2) e.anonymous = p[0] == '0' && (p[1] == ' ' || p[1] == '\n' || p[1] == '\0');
      while (*p && *p != ' ' && *p != '\n') ++p;
    }
    while (*p == ' ') ++p;
    // Device files may not be readable word by word (and hold no heap pointers); /dev/zero
    // mappings are plain anonymous memory.
    if (p[0] == '/' && p[1] == 'd' && p[2] == 'e' && p[3] == 'v' && p[4] == '/')
      e.device = !(p[5] == 'z' && p[6] == 'e' && p[7] == 'r' && p[8] == 'o');
    while (*p && *p != '\n') ++p;
    if (*p == '\n') ++p;
    e.lo = Hide(lo);
    e.hi = Hide(hi);
    if (lo < hi && !maps_.Push(e)) return false;
  }
  // The page heap's memory, from its runs (free or in use): every page it manages
  // belongs to exactly one run. Adjacent spans are merged as they come, in address order.
  heap_.Clear();
  struct Ctx {
    MappedArray<Range>* heap;
    bool ok;
  } ctx{&heap_, true};
  introspection::ForEachHeapRun(
      [](uintptr_t run_lo, uintptr_t run_hi, void* arg) {
        auto* c = static_cast<Ctx*>(arg);
        const uintptr_t lo = Hide(run_lo);
        const uintptr_t hi = Hide(run_hi);
        if (!c->heap->empty() && c->heap->back().hi == lo) c->heap->back().hi = hi;
        else c->ok &= c->heap->Push(Range{lo, hi});
      },
      &ctx);
  return ctx.ok;
}

const MapEntry* LivenessScan::EntryContaining(uintptr_t addr) const {
  const uintptr_t h = Hide(addr);
  size_t lo = 0, hi = maps_.size();
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (maps_[mid].hi <= h) lo = mid + 1;
    else hi = mid;
  }
  if (lo < maps_.size() && maps_[lo].lo <= h && h < maps_[lo].hi) return &maps_[lo];
  return nullptr;
}

long LivenessScan::FindContaining(uintptr_t addr) const {
  if (objects_.empty() || addr < min_start_ || addr >= max_end_) return -1;
  const uintptr_t h = Hide(addr);
  size_t lo = 0, hi = objects_.size();
  while (lo < hi) {  // first object starting after addr
    const size_t mid = (lo + hi) / 2;
    if (objects_[mid].start <= h) lo = mid + 1;
    else hi = mid;
  }
  if (lo == 0) return -1;
  const ScanObject& o = objects_[lo - 1];
  return h < o.end ? static_cast<long>(lo - 1) : -1;
}

inline long LivenessScan::FindForPointer(uintptr_t value) const {
  const long i = FindContaining(value);
  if (i < 0) return -1;
  if (max_offset_ >= 0 && value - Reveal(objects_[static_cast<size_t>(i)].start) > static_cast<uint64_t>(max_offset_))
    return -1;
  return i;
}

inline void LivenessScan::MarkAndPush(long i) {
  ScanObject& o = objects_[static_cast<size_t>(i)];
  if (o.live) return;
  o.live = true;
  worklist_.Push(static_cast<uint32_t>(i));  // reserved for every object in Build
}

void LivenessScan::ScanWords(const uintptr_t* words, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const uintptr_t w = words[i];
    if (w - min_start_ >= max_end_ - min_start_) continue;  // cheap filter, one compare
    const long j = FindForPointer(w);
    if (j >= 0) MarkAndPush(j);
  }
}

void LivenessScan::ScanMemory(uintptr_t from, uintptr_t hi, bool copy) {
  const size_t a = alignment_;
  const uintptr_t lo = (from + a - 1) & ~static_cast<uintptr_t>(a - 1);
  if (hi < lo + sizeof(uintptr_t)) return;
  const uintptr_t span = max_end_ - min_start_;
  auto scan_block = [&](const char* base, size_t len) -> size_t {
    // Returns the offset of the first position not examined.
    size_t k = 0;
    for (; k + sizeof(uintptr_t) <= len; k += a) {
      uintptr_t w;
      __builtin_memcpy(&w, base + k, sizeof(w));
      if (w - min_start_ >= span) continue;
      const long j = FindForPointer(w);
      if (j >= 0) MarkAndPush(j);
    }
    return k;
  };
  if (!copy || !copy_ok_) {
    scan_block(reinterpret_cast<const char*>(lo), hi - lo);
    return;
  }
  // Root memory is copied through process_vm_readv, which turns an unreadable page (a file
  // mapping past its end, a range unmapped by a thread we could not stop) into a short
  // count instead of a crash.
  if (buffer_.size() < kCopyChunk / sizeof(uintptr_t) && !buffer_.Resize(kCopyChunk / sizeof(uintptr_t))) {
    copy_ok_ = false;
    scan_block(reinterpret_cast<const char*>(lo), hi - lo);
    return;
  }
  char* buf = reinterpret_cast<char*>(buffer_.data());
  uintptr_t p = lo;
  while (p + sizeof(uintptr_t) <= hi) {
    const size_t want = std::min<uintptr_t>(kCopyChunk, hi - p);
    const long got = os::CopyFromSelf(buf, p, want);
    if (got < 0) {  // the call is unavailable here: read directly from now on
      copy_ok_ = false;
      scan_block(reinterpret_cast<const char*>(p), hi - p);
      break;
    }
    if (got == 0) {  // unreadable page: skip it
      p = (p + kPage) & ~uintptr_t{kPage - 1};
      p = (p + a - 1) & ~static_cast<uintptr_t>(a - 1);
      continue;
    }
    const size_t done = scan_block(buf, static_cast<size_t>(got));
    p += done > 0 ? done : a;
  }
  // The bounce buffer holds copies of root memory only, which are roots anyway; clear it
  // all the same so that no copy outlives the scan.
  __builtin_memset(buf, 0, kCopyChunk);
}

void LivenessScan::Drain() {
  while (!worklist_.empty()) {
    const uint32_t i = worklist_.back();
    worklist_.PopBack();
    const ScanObject& o = objects_[i];
    ScanMemory(Reveal(o.start), Reveal(o.end), /*copy=*/false);
  }
}

uintptr_t LivenessScan::FindDeadDescriptor(const MapEntry& e) const {
  const uintptr_t lo = Reveal(e.lo);
  const uintptr_t hi = Reveal(e.hi);
  const size_t pages = (hi - lo) / kPage;
  unsigned char resident[1024];
  alignas(16) uintptr_t page[kPage / sizeof(uintptr_t)];
  // From the top down: the descriptor sits at the top of the stack block.
  for (size_t done = 0; done < pages;) {
    const size_t n = std::min<size_t>(sizeof(resident), pages - done);
    const uintptr_t chunk_lo = hi - (done + n) * kPage;
    if (!os::PageResidency(chunk_lo, n, resident)) __builtin_memset(resident, 1, n);
    for (size_t k = n; k-- > 0;) {
      if ((resident[k] & 1) == 0) continue;  // never touched (or swapped): no descriptor
      const uintptr_t pg = chunk_lo + k * kPage;
      if (copy_ok_) {
        if (os::CopyFromSelf(page, pg, kPage) != static_cast<long>(kPage)) continue;
      } else {
        __builtin_memcpy(page, reinterpret_cast<const void*>(pg), kPage);
      }
      // glibc's x86-64 thread descriptor starts with tcbhead_t {tcb, dtv, self}: tcb and
      // self point at the descriptor itself, and dtv into the thread's heap-allocated
      // vector of TLS blocks. The descriptor is 64-byte aligned.
      for (size_t off = 0; off + 3 * sizeof(uintptr_t) <= kPage; off += 64) {
        const uintptr_t t = pg + off;
        const uintptr_t* w = page + off / sizeof(uintptr_t);
        if (w[0] == t && w[2] == t && FindContaining(w[1]) >= 0) {
          __builtin_memset(page, 0, sizeof(page));
          return t;
        }
      }
    }
    done += n;
  }
  __builtin_memset(page, 0, sizeof(page));
  return 0;
}

void LivenessScan::ComputeRoots(const ScanConfig& config, const ModuleInfo* modules, size_t num_modules,
                                const ThreadList& threads, ScanStats* stats) {
  // A: memory that may hold program pointers at all.
  MappedArray<Range> candidates;
  for (const MapEntry& e : maps_) {
    if (!e.readable || !e.writable || e.device) continue;
    if (e.shared && !e.anonymous) continue;  // file-backed shared: SIGBUS risk, no heap pointers
    candidates.Push(Range{e.lo, e.hi});
  }
  Normalize(&candidates);

  // H: never roots.
  MappedArray<Range> never;
  Append(&never, heap_);
  introspection::ForEachAllocatorStatic(
      [](uintptr_t lo, uintptr_t hi, void* list) { AddRevealed(static_cast<MappedArray<Range>*>(list), lo, hi); },
      &never);
  threads.AddOwnMemory(&never);
  Append(&never, own_);
  never.Push(objects_.Extent());
  never.Push(worklist_.Extent());
  never.Push(maps_.Extent());
  never.Push(heap_.Extent());
  Normalize(&never);

  // Known stack pointers: the checker's own, and every thread's we know.
  struct Sp {
    uintptr_t sp;   // hidden
    uintptr_t tp;   // hidden
    uintptr_t red;  // bytes below sp that are live
  };
  MappedArray<Sp> sps;
  sps.Push(Sp{Hide(config.self_sp), Hide(config.self_tp), 0});
  bool unknown_sp = false;
  for (int i = 0; i < threads.count(); ++i) {
    const ThreadState& t = threads.thread(i);
    if (t.sp == 0) {
      unknown_sp = true;
      continue;
    }
    sps.Push(Sp{Hide(t.sp), Hide(t.tp), kRedZone});
  }

  // S: parts of stacks that are not live.
  MappedArray<Range> stack_cuts;     // below each stack pointer; dead cached stacks
  MappedArray<Range> whole_stacks;   // entire stack mappings (thread data)
  MappedArray<Range> thread_roots;   // live parts of stacks
  MappedArray<Range> heap_stacks;    // live parts of stacks that are heap objects
  for (const Sp& s : sps) {
    const uintptr_t sp = Reveal(s.sp);
    const long obj = FindContaining(sp);
    if (obj >= 0) {  // a stack the program allocated with malloc
      if (!config.thread_live) continue;  // thread data: not a root in this mode
      const ScanObject& o = objects_[static_cast<size_t>(obj)];
      const uintptr_t from = std::max(Reveal(o.start), sp - s.red);
      AddRevealed(&heap_stacks, from, Reveal(o.end));
      // In use as a stack: not a leak. Marked without being queued, so that only its live
      // part (the range above) is scanned, not the stale frames below the stack pointer.
      objects_[static_cast<size_t>(obj)].live = true;
      continue;
    }
    const MapEntry* e = EntryContaining(sp);
    if (e == nullptr) continue;
    const uintptr_t live_from = std::max(Reveal(e->lo), sp - s.red);
    AddRevealed(&stack_cuts, Reveal(e->lo), live_from);
    AddRevealed(&thread_roots, live_from, Reveal(e->hi));
    whole_stacks.Push(Range{e->lo, e->hi});
  }
  // Dead threads' cached stacks: a mapping right above a guard page, holding no known stack
  // pointer, with a thread descriptor that is no live thread's. Skipped only when every
  // thread's stack pointer is known (else the "dead" stack might be a live one).
  if (!unknown_sp) {
    for (size_t i = 1; i < maps_.size(); ++i) {
      const MapEntry& e = maps_[i];
      const MapEntry& below = maps_[i - 1];
      if (!e.readable || !e.writable || !e.anonymous || !below.guard || below.hi != e.lo) continue;
      bool has_sp = false;
      for (const Sp& s : sps) has_sp |= e.lo <= s.sp && s.sp < e.hi;
      if (has_sp) continue;
      const uintptr_t t = FindDeadDescriptor(e);
      if (t == 0) continue;
      bool live = false;
      for (const Sp& s : sps) live |= Reveal(s.tp) == t;
      if (live) continue;
      AddRevealed(&stack_cuts, Reveal(e.lo), t);
      whole_stacks.Push(Range{e.lo, e.hi});
      ++stats->dead_stacks;
    }
  }

  // System data: runtime libraries' writable segments, thread descriptors, their TLS.
  MappedArray<Range> system;
  intptr_t min_tls = 0;
  for (size_t m = 0; m < num_modules; ++m) {
    const ModuleInfo& mod = modules[m];
    if (mod.tls_size > 0 && mod.tls_offset < min_tls) min_tls = mod.tls_offset;
    if (!mod.system) continue;
    for (int w = 0; w < mod.num_writable; ++w) system.Push(mod.writable[w]);
  }
  MappedArray<Range> thread_data;  // each thread's descriptor and static TLS
  for (const Sp& s : sps) {
    const uintptr_t tp = Reveal(s.tp);
    if (tp == 0) continue;
    AddRevealed(&system, tp, tp + config.tcb_size);
    for (size_t m = 0; m < num_modules; ++m) {
      const ModuleInfo& mod = modules[m];
      if (mod.system && mod.tls_size > 0)
        AddRevealed(&system, tp + static_cast<uintptr_t>(mod.tls_offset),
                    tp + static_cast<uintptr_t>(mod.tls_offset) + mod.tls_size);
    }
    AddRevealed(&thread_data, tp + static_cast<uintptr_t>(min_tls), tp + config.tcb_size);
  }

  // Assemble.
  MappedArray<Range> wanted;
  MappedArray<Range> tmp;
  if (config.global_live) {
    MappedArray<Range> cuts;
    Append(&cuts, stack_cuts);
    if (!config.thread_live) Append(&cuts, whole_stacks);
    Normalize(&cuts);
    Subtract(candidates, cuts, &tmp);
    Append(&wanted, tmp);
  }
  if (config.thread_live) {
    Append(&wanted, thread_roots);
    Append(&wanted, thread_data);
  }
  Append(&wanted, system);
  Normalize(&wanted);
  Intersect(wanted, candidates, &tmp);
  Subtract(tmp, never, &roots_);
  if (config.thread_live) {
    Append(&roots_, heap_stacks);
  }
  for (const Range& r : roots_) {
    ++stats->root_ranges;
    stats->root_bytes += Reveal(r.hi) - Reveal(r.lo);
  }
}

void LivenessScan::Flood(const ScanConfig& config, const ModuleInfo* modules, size_t num_modules,
                         const ThreadList& threads, ScanStats* stats) {
  for (ScanObject& o : objects_) o.live = false;
  worklist_.Clear();
  alignment_ = config.source_alignment == 0 ? 1 : config.source_alignment;
  max_offset_ = config.max_pointer_offset;
  *stats = ScanStats{};
  if (objects_.empty()) return;

  for (size_t i = 0; i < objects_.size(); ++i)
    if (objects_[i].root) MarkAndPush(static_cast<long>(i));
  Drain();

  ComputeRoots(config, modules, num_modules, threads, stats);
  for (const Range& r : roots_) {
    ScanMemory(Reveal(r.lo), Reveal(r.hi), /*copy=*/true);
    Drain();
  }
  if (config.thread_live) {
    for (int i = 0; i < threads.count(); ++i) {
      const ThreadState& t = threads.thread(i);
      ScanWords(t.regs, static_cast<size_t>(t.num_regs));
    }
  }
  // Alternate signal stacks are the kernel's business: live at every level.
  ScanWords(&config.self_altstack, 1);
  for (int i = 0; i < threads.count(); ++i) ScanWords(&threads.thread(i).altstack, 1);
  Drain();
  roots_.Release();
  for (const ScanObject& o : objects_) {
    if (!o.live) continue;
    ++stats->live_objects;
    stats->live_bytes += o.record->size;
  }
  stats->copied_safely = copy_ok_;
}

}  // namespace tcm::heapcheck
