/* A library that does nothing but take as much address space as libtcmalloc_minimal (its
 * 64 MiB of zero-initialised class-map leaf) and register fork handlers: preloaded, the
 * kernel places it and libc where it places ours, so libc's code lies in the same 64 KiB
 * fault-around windows, and the program's own malloc is glibc's. startup_rss_test.py
 * compares libc's resident text with ours against this.
 *
 * The fork handlers: glibc's fork calls its own malloc's locking directly, but any other
 * allocator has to register through pthread_atfork, whose __register_atfork lies in a
 * window of its own in Debian 12's libc (glibc's exit touches that window anyway, through
 * __unregister_atfork). Counted here so the comparison is of the calls we could avoid. */
#include <pthread.h>

char startup_layout_standin_bss[64 << 20];

static void nothing(void) {}

__attribute__((constructor)) static void register_fork_handlers(void) {
  pthread_atfork(nothing, nothing, nothing);
}
