// Functions the kernel's vDSO exports, found without the dynamic loader.
//
// Why: the coarse clock is read on every housekeeping tick. Going through libc's
// clock_gettime costs nothing in time, but its code lies in a 64 KiB fault-around window of
// libc's text that a program using glibc's malloc never touches (Debian 12's glibc: the
// library's 68 MiB mapping is 2 MiB-aligned, which puts libc just below it at one fixed
// place), so every process paid 64 KiB of resident text for it. The vDSO's own
// __vdso_clock_gettime is the function libc calls anyway.
//
// The image is the vDSO's ELF header (getauxval(AT_SYSINFO_EHDR)); the look-up reads its
// dynamic symbol table through DT_HASH or, when that is missing, DT_GNU_HASH. Valgrind and
// some sandboxes give the process no vDSO: every function here then returns nullptr and the
// caller keeps libc's function. Nothing allocates, locks or makes a system call.
#ifndef TCMALLOC_PLATFORM_VDSO_H_
#define TCMALLOC_PLATFORM_VDSO_H_

#include <ctime>

namespace tcm::vdso {

// The address of the defined function `name` in the ELF image at `image`, or nullptr when
// image is null, is not a 64-bit ELF shared object of this machine, or has no such symbol.
// Symbol versions are not checked: the kernel exports each name once.
const void* FindFunction(const void* image, const char* name);

// The running process's vDSO image (nullptr under valgrind and where the kernel maps none).
const void* ProcessImage();

using ClockGettimeFn = int (*)(clockid_t, struct timespec*);

// The vDSO's clock_gettime in `image`, or nullptr. It returns 0, or -errno where libc's
// would return -1 and set errno (a clock the vDSO passes to the kernel and the kernel
// refuses); the coarse monotonic clock never fails.
ClockGettimeFn FindClockGettime(const void* image);

}  // namespace tcm::vdso

#endif  // TCMALLOC_PLATFORM_VDSO_H_
