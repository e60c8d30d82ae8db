// Restartable sequences (rseq) and the CPU facts the per-CPU caches need.
//
// The kernel keeps, for every thread that registered a `struct rseq` area, the number of
// the CPU it runs on in that area, and aborts a registered critical section of the thread
// (jumping to its abort handler) whenever the thread is preempted, migrated or signalled
// inside it. A critical section that ends in a single committing store therefore runs as
// if it were atomic with respect to every other thread on the same CPU.
//
// glibc 2.35+ registers an area for every thread itself and says where (__rseq_offset from
// the thread pointer, __rseq_size). We use it when present; with an older glibc we
// register an area of our own per thread (initial-exec TLS, so it too sits at a fixed
// offset from the thread pointer). When glibc has rseq support but did not register
// (kernel without rseq, valgrind, a seccomp filter, GLIBC_TUNABLES=glibc.pthread.rseq=0 —
// the last one usually because another runtime wants the single registration a thread is
// allowed), we do not register either: the allocator then runs on per-thread caches.
#ifndef TCMALLOC_PLATFORM_RSEQ_H_
#define TCMALLOC_PLATFORM_RSEQ_H_

#include <cstddef>
#include <cstdint>

namespace tcm::os {

// The signature the kernel checks in the 4 bytes before every abort handler. It must be
// the one the area was registered with: glibc uses this value on x86-64, and so do we.
inline constexpr uint32_t kRseqSignature = 0x53053053;

// Byte offsets of the fields of the kernel's struct rseq that the critical sections use.
inline constexpr int kRseqCpuIdOffset = 4;  // uint32 cpu_id: -1 unregistered, -2 failed
inline constexpr int kRseqCsOffset = 8;     // uint64 rseq_cs: the armed section's descriptor

enum class RseqSource { kNone, kGlibc, kOwn };

// Decides, once per process, which rseq area the critical sections read: glibc's, our own
// (registered per thread by RegisterThreadRseq), or none. allow_own = false never uses an
// own area; force_own (tests, with glibc's registration turned off by its tunable) skips
// glibc's. Idempotent: the first call decides.
RseqSource InitRseq(bool allow_own, bool force_own = false);
RseqSource CurrentRseqSource();

// glibc's offset on the machine this library was built on (CMake's probe; glibc keeps the
// area in its thread descriptor, so the offset is fixed for a glibc build). When the area in
// use is there (RseqOffsetIsBuiltIn), the per-CPU fast paths address it as a constant and
// skip loading RseqOffsetFast first: one load less before the CPU number, which every
// malloc's result waits for (binary trees made a node in 6.1-6.6 ns against 7.7-7.9).
#ifdef TCM_BUILT_IN_RSEQ_OFFSET
inline constexpr bool kHasBuiltInRseqOffset = true;
inline constexpr ptrdiff_t kBuiltInRseqOffset = TCM_BUILT_IN_RSEQ_OFFSET;
#else
inline constexpr bool kHasBuiltInRseqOffset = false;
inline constexpr ptrdiff_t kBuiltInRseqOffset = 0;
#endif
// True once InitRseq chose glibc's area and glibc reports it at kBuiltInRseqOffset.
bool RseqOffsetIsBuiltIn();

// Offset of the rseq area from the thread pointer (%fs base), valid for every thread once
// InitRseq returned kGlibc or kOwn. Read by the per-CPU fast paths (hidden: one load).
namespace rseq_internal {
extern ptrdiff_t offset __attribute__((visibility("hidden")));
}
inline ptrdiff_t RseqOffsetFast() { return rseq_internal::offset; }
ptrdiff_t RseqOffset();

// With our own area: registers it for the calling thread if it is not yet. Returns true when
// the calling thread has a usable area (always true with glibc's once it registered).
bool RegisterThreadRseq();

// The CPU the calling thread runs on according to its rseq area; -1 if it has none. Only a
// hint outside a critical section: the thread may migrate right after.
int RseqCurrentCpu();

// Number of CPU indices the kernel may ever report: 1 + the highest CPU of the possible set
// (/sys/devices/system/cpu/possible), so hot-plugged CPUs have a slot. At least 1.
int NumPossibleCpus();

// Registers the process for MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ; false if unsupported.
bool RegisterRseqFence();
// Aborts (restarts) any rseq critical section running on `cpu` in this process and waits
// until that is done: after it returns, a section that started before the call has either
// committed or will start over and see memory as it is now. False if it failed (then the
// caller must not assume anything).
bool RseqFence(int cpu);

// The calling thread's affinity: restricts it to one CPU (tests, benchmarks), or back to all.
bool PinToCpu(int cpu);
bool UnpinFromCpus();
// How many CPUs the process may run on right now (its affinity mask); at least 1.
int AllowedCpuCount();

}  // namespace tcm::os

#endif  // TCMALLOC_PLATFORM_RSEQ_H_
