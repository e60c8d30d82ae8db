// MallocExtension: the allocator's control and inspection interface, as in gperftools.
//
// Programs call MallocExtension::instance()->Method(...). The class is polymorphic so a
// program linked against a malloc without these extensions still links; the virtual
// methods are declared in gperftools' order so binaries built against its header call the
// right function on ours. C programs use malloc_extension_c.h.
#ifndef TCMALLOC_MALLOC_EXTENSION_H_
#define TCMALLOC_MALLOC_EXTENSION_H_

#include <stddef.h>
#include <stdint.h>

#include <string>
#include <vector>

#ifndef PERFTOOLS_DLL_DECL
#define PERFTOOLS_DLL_DECL __attribute__((visibility("default")))
#endif

static const int kMallocHistogramSize = 64;

// Where GetHeapSample and GetHeapGrowthStacks append their text.
typedef std::string MallocExtensionWriter;

namespace base {
struct MallocRange;
}

// A source of memory for the allocator, pluggable with SetSystemAllocator. Alloc returns
// at least `size` bytes aligned to `alignment` and stores the size obtained in
// *actual_size, or returns NULL.
class PERFTOOLS_DLL_DECL SysAllocator {
 public:
  SysAllocator() {}
  virtual ~SysAllocator();
  virtual void* Alloc(size_t size, size_t* actual_size, size_t alignment) = 0;
};

class PERFTOOLS_DLL_DECL MallocExtension {
 public:
  virtual ~MallocExtension();

  // Kept for compatibility; nothing needs setting up.
  static void Initialize();

  // Consistency checks. VerifyAllMemory walks the whole heap (and aborts with a message on
  // corruption); the others check that p is a live block of ours (or NULL).
  virtual bool VerifyAllMemory();
  virtual bool VerifyNewMemory(const void* p);
  virtual bool VerifyArrayNewMemory(const void* p);
  virtual bool VerifyMallocMemory(const void* p);
  // Blocks in use, their total bytes, and a histogram of blocks by log2 of their size.
  virtual bool MallocMemoryStats(int* blocks, size_t* total, int histogram[kMallocHistogramSize]);

  // A human-readable report, NUL-terminated, truncated to buffer_length - 1 characters.
  virtual void GetStats(char* buffer, int buffer_length);

  // Appends a heap profile (pprof's text format) of the sampled live objects.
  virtual void GetHeapSample(MallocExtensionWriter* writer);
  // Appends a heap profile of the stacks at which the heap grew.
  virtual void GetHeapGrowthStacks(MallocExtensionWriter* writer);

  // Calls func(arg, range) for each range of memory the allocator manages.
  typedef void(RangeFunction)(void*, const base::MallocRange*);
  virtual void Ranges(void* arg, RangeFunction func);

  // Named numeric properties ("generic.heap_size", "tcmalloc.pageheap_free_bytes", ...).
  // Get returns false for unknown names; Set returns false for unknown or read-only ones.
  virtual bool GetNumericProperty(const char* property, size_t* value);
  virtual bool SetNumericProperty(const char* property, size_t value);

  // MarkThreadIdle gives the calling thread's cache back (it is rebuilt on next use);
  // MarkThreadBusy undoes the hint.
  virtual void MarkThreadIdle();
  virtual void MarkThreadBusy();

  virtual SysAllocator* GetSystemAllocator();
  virtual void SetSystemAllocator(SysAllocator* a);

  // Returns at least num_bytes of free memory to the OS if there is that much.
  virtual void ReleaseToSystem(size_t num_bytes);
  // Returns all free memory to the OS.
  virtual void ReleaseFreeMemory();

  // Speed of returning idle memory to the OS (0 = never; see TCMALLOC_RELEASE_RATE).
  virtual void SetMemoryReleaseRate(double rate);
  virtual double GetMemoryReleaseRate();

  // Ours, not gperftools' (a static member: the class's vtable stays gperftools' layout).
  // One maintenance pass now: idle caches drained, memory idle for the release-rate delay
  // returned to the OS; returns the bytes returned. For programs that run their own
  // maintenance thread instead of TCMALLOC_BACKGROUND_RELEASE: call it every 0.1-1 s.
  static size_t ProcessBackgroundActions();

  // Bytes an allocation of `size` really gets.
  virtual size_t GetEstimatedAllocatedSize(size_t size);
  // Usable bytes of a block we returned (p must be the block's start; NULL gives 0).
  virtual size_t GetAllocatedSize(const void* p);

  enum Ownership { kUnknownOwnership = 0, kOwned, kNotOwned };
  // kOwned if p lies in memory this allocator handed out; kNotOwned otherwise (and for NULL).
  virtual Ownership GetOwnership(const void* p);

  // The current implementation; never NULL.
  static MallocExtension* instance();
  // Replaces the implementation (used by layers wrapping the allocator).
  static void Register(MallocExtension* implementation);

  struct FreeListInfo {
    size_t min_object_size;
    size_t max_object_size;
    size_t total_bytes_free;
    const char* type;  // "tcmalloc.thread", "tcmalloc.central", "tcmalloc.transfer",
                       // "tcmalloc.page", "tcmalloc.page_unmapped", "tcmalloc.large", ...
  };
  virtual void GetFreeListSizes(std::vector<FreeListInfo>* v);

  // Sampled stacks as a new[]-ed array of {count, size, depth, pc[depth]}... ended by a
  // count of 0; the caller delete[]s it. *sample_period receives the sampling period.
  virtual void** ReadStackTraces(int* sample_period);
  virtual void** ReadHeapGrowthStackTraces();

  // Bytes held by the calling thread's cache.
  virtual size_t GetThreadCacheSize();
  // Empties the calling thread's cache but keeps it for reuse.
  virtual void MarkThreadTemporarilyIdle();
};

namespace base {

// One range reported by MallocExtension::Ranges.
struct MallocRange {
  enum Type { INUSE, FREE, UNMAPPED, UNKNOWN };
  uintptr_t address;
  size_t length;
  Type type;
  double fraction;  // share of the range in use (INUSE only)
};

}  // namespace base

#endif  // TCMALLOC_MALLOC_EXTENSION_H_
