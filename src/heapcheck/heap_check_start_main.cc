// Noticing the start of main() without changing the program.
//
// Why: "minimal" must know which allocations happened before main, and the levels that
// check before global destructors must register their exit handler after the program's
// constructors registered theirs (exit handlers run last-registered first). There is no
// other hook between the constructors and main.
//
// How: the program's _start calls __libc_start_main(main, ...), and we hand glibc a wrapper
// of main instead (heap_checker.cc, WrapMain).
//   shared library  we define __libc_start_main itself: _start calls it through the
//                   dynamic linker, and our library comes before libc (preloaded or linked
//                   with -ltcmalloc). The real one is the next definition, glibc's (both of
//                   its symbol versions are the same function since glibc 2.34, and older
//                   ones take the same arguments).
//   static archive  the library's CMake target links programs with
//                   --wrap=__libc_start_main, which sends _start's call to
//                   __wrap___libc_start_main and lets us call __real___libc_start_main.
//                   Without that option the wrapper is simply unused, and the check runs
//                   from the checker's destructor, after global destructors.
// TCM_HEAPCHECK_WRAP selects the second form (heap_check_start_main_wrap.cc).
#include <unistd.h>

#include "heapcheck/heap_checker.h"
#include "platform/modules.h"
#include "platform/os.h"

namespace {
using StartMain = int (*)(tcm::heapcheck::MainFunction, int, char**, void (*)(), void (*)(), void (*)(), void*);
}  // namespace

#ifdef TCM_HEAPCHECK_WRAP

extern "C" int __real___libc_start_main(tcm::heapcheck::MainFunction main, int argc, char** argv, void (*init)(),
                                        void (*fini)(), void (*rtld_fini)(), void* stack_end);

extern "C" __attribute__((visibility("default"))) int __wrap___libc_start_main(
    tcm::heapcheck::MainFunction main, int argc, char** argv, void (*init)(), void (*fini)(), void (*rtld_fini)(),
    void* stack_end) {
  return __real___libc_start_main(tcm::heapcheck::WrapMain(main), argc, argv, init, fini, rtld_fini, stack_end);
}

#else

extern "C" __attribute__((visibility("default"))) int __libc_start_main(tcm::heapcheck::MainFunction main, int argc,
                                                                      char** argv, void (*init)(), void (*fini)(),
                                                                      void (*rtld_fini)(), void* stack_end) {
  auto real = reinterpret_cast<StartMain>(tcm::os::NextSymbol("__libc_start_main"));
  if (real == nullptr) {
    static const char kMsg[] = "tcmalloc: heap checker: glibc's __libc_start_main not found\n";
    tcm::os::WriteStderr(kMsg, sizeof(kMsg) - 1);
    _exit(127);
  }
  return real(tcm::heapcheck::WrapMain(main), argc, argv, init, fini, rtld_fini, stack_end);
}

#endif
