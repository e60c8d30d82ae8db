// The heap leak checker's entry points inside the library (the public interface is
// include/gperftools/heap-checker.h; how it works is in docs/heap-checker.md).
//
// What it sees of the allocator: api/introspection.h only (options, user stacks, block
// lookup, the allocator's locks, the page heap's runs and its static objects).
//
// Components:
//   heap_checker.cc        flags (HEAPCHECK, HEAP_CHECK_*), start-up and exit sequencing, the
//                          malloc hooks that record every allocation, HeapLeakChecker
//   heap_check_table.*     the record of live allocations and interned stacks
//   thread_list.*          stopping all other threads and capturing their registers
//   heap_check_scan.*      roots and the liveness flood
//   heap_check_report.*    leak report, leak profile, symbol names
//   heap_check_memory.*    hidden addresses, mmap-backed arrays, whole-file reads (no malloc,
//                          no libc locks); the system calls themselves are src/platform/'s
//                          (files.h, threads.h, modules.h)
//   heap_check_start_main.cc   notices the start of main(): shared library (interposes
//                          __libc_start_main) and static archive (linked with --wrap)
//
// SYNCHRONIZATION. One lock, the checker lock (heap_checker.cc), guards the allocation and
// stack tables, the serial counter and every check. Lock order: checker lock, then the
// allocator's locks (introspection::LockAllocator), taken only by a check. The malloc hooks run with no
// allocator lock held (malloc_hook.h) and take the checker lock only after capturing their
// stack, because unwinding may take the dynamic loader's lock, and a thread inside dlopen
// (holding it) may be waiting in our hook. A check gathers everything that needs libc
// (os::ForEachLoadedModule: dl_iterate_phdr) before taking the checker lock, and reports after releasing it.
#ifndef TCMALLOC_HEAP_CHECKER_H_
#define TCMALLOC_HEAP_CHECKER_H_

namespace tcm::heapcheck {

// Called just before main() runs (after every constructor of the program): the point where
// "minimal" starts checking and where the whole-program check is scheduled to run first
// among the exit handlers, i.e. before global destructors.
void OnMainStart();

// For the __libc_start_main wrappers (heap_check_start_main*.cc): returns the function to
// run instead of the program's main, which calls OnMainStart() and then main.
using MainFunction = int (*)(int, char**, char**);
MainFunction WrapMain(MainFunction main);

}  // namespace tcm::heapcheck

#endif  // TCMALLOC_HEAP_CHECKER_H_
