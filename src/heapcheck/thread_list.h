// Stopping every other thread of the process while the heap checker scans memory, and
// capturing what each one holds in its registers.
//
// How: each thread is sent a real-time signal with tgkill(). Its handler records the
// interrupted stack pointer, the thread pointer (%fs base: where glibc keeps the thread's
// descriptor and static TLS) and every general-purpose and SSE register from the signal's
// ucontext, then parks on a futex until the checker resumes everybody. A signal handler is
// the only way a process can freeze its own threads with their registers: ptrace cannot
// attach to threads of its own thread group (gperftools had to clone a helper process for
// that, which breaks under Yama's ptrace_scope and seccomp). See docs/heap-checker.md.
//
// Threads that cannot be stopped — they block the signal, or sit in vfork() or an
// uninterruptible sleep — are reported as not stopped, with the stack pointer and syscall
// arguments the kernel shows in /proc/self/task/<tid>/syscall when it has them.
//
// Everything here runs while other threads may be frozen holding arbitrary locks: only raw
// system calls of src/platform/ (threads.h) and memory from heap_check_memory. One ThreadList may be stopping
// threads at a time (the checker's lock guarantees it).
#ifndef TCMALLOC_THREAD_LIST_H_
#define TCMALLOC_THREAD_LIST_H_

#include <cstddef>
#include <cstdint>

#include "heapcheck/heap_check_memory.h"

namespace tcm::heapcheck {

// General-purpose registers (23 in the kernel's ucontext) plus xmm0-15 as 2 words each.
inline constexpr int kMaxRegisterWords = 23 + 32;

struct ThreadState {
  int tid;
  bool stopped;  // parked in our handler: sp, tp and regs are exact
  uintptr_t sp;  // stack pointer when interrupted; 0 if unknown
  uintptr_t tp;  // thread pointer (%fs base); 0 if unknown
  // The alternate signal stack (sigaltstack), 0 if none: the kernel may be the only one to
  // know it (a program may malloc it and keep no pointer of its own).
  uintptr_t altstack;
  int num_regs;
  uintptr_t regs[kMaxRegisterWords];
};

class ThreadList {
 public:
  constexpr ThreadList() = default;
  ThreadList(const ThreadList&) = delete;
  ThreadList& operator=(const ThreadList&) = delete;

  // Stops every thread but the caller. Returns false if /proc/self/task could not be read
  // or no signal could be borrowed (then nothing is stopped and count() is 0).
  bool StopAll();
  // Lets every stopped thread run again and forgets them. Safe to call after a failed
  // StopAll.
  void ResumeAll();

  int count() const { return static_cast<int>(threads_.size()); }
  const ThreadState& thread(int i) const { return threads_[static_cast<size_t>(i)]; }
  int not_stopped() const { return not_stopped_; }
  // The memory holding other threads' registers and stack pointers: the scan must not
  // find these copies when it scans anonymous memory for roots.
  void AddOwnMemory(MappedArray<Range>* out) const;

 private:
  MappedArray<ThreadState> threads_;
  int not_stopped_ = 0;
};

}  // namespace tcm::heapcheck

#endif  // TCMALLOC_THREAD_LIST_H_
