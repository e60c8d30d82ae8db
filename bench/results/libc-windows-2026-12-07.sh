#!/usr/bin/env bash
# Which libc calls cost a 64 KiB window of libc's text (bench/README.md, "Forty-ninth
# session"). A program that mallocs and frees one block runs with a stand-in library that
# takes our library's address space (64 MiB .bss: the kernel 2 MiB-aligns it, and libc lands
# just below, at one place) and calls one libc function from a constructor; a destructor
# preloaded last prints libc's resident text. Then the same with our library.
#   bash bench/results/libc-windows-2026-12-07.sh [build/src/libtcmalloc_minimal.so]
set -euo pipefail
LIB=$(realpath "${1:-build/src/libtcmalloc_minimal.so}")
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cat > "$T/triv.c" <<'C'
#include <stdlib.h>
void *volatile sink;
int main(void) { sink = malloc(32); free(sink); return 0; }
C
cat > "$T/libcpages.c" <<'C'
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
__attribute__((destructor)) static void dump(void) {
  FILE *f = fopen("/proc/self/maps", "r");
  int pm = open("/proc/self/pagemap", O_RDONLY);
  char line[512], perm[8];
  unsigned long a, b, kib = 0;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "%lx-%lx %7s", &a, &b, perm) == 3 && strstr(line, "/libc.so") && !strcmp(perm, "r-xp"))
      for (unsigned long x = a; x < b; x += 4096) {
        uint64_t e = 0;
        if (pread(pm, &e, 8, (off_t)(x / 4096 * 8)) == 8 && (e >> 63)) kib += 4;
      }
  fprintf(stderr, "%lu\n", kib);
}
C
gcc -O2 -o "$T/triv" "$T/triv.c"
gcc -O2 -shared -fPIC -o "$T/libcpages.so" "$T/libcpages.c"
runs() { for _ in 1 2 3 4; do LD_PRELOAD="$1 $T/libcpages.so" "$T/triv" 2>&1; done | tr '\n' ' '; echo; }
for call in "0" \
    "({struct timespec t; clock_gettime(CLOCK_MONOTONIC_COARSE, &t); 0;})" \
    "pthread_atfork(0, 0, 0)" "({struct sigaction a; sigaction(SIGBUS, 0, &a);})" \
    "syscall(SYS_getpid)" "({pthread_key_t k; pthread_key_create(&k, 0);})" "getauxval(AT_SYSINFO_EHDR)"; do
  cat > "$T/standin.c" <<C
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
char standin_bss[64 << 20];
volatile long sink;
__attribute__((constructor)) static void call(void) { sink = (long)$call; }
C
  gcc -O2 -shared -fPIC -o "$T/standin.so" "$T/standin.c" -lpthread
  printf 'stand-in calling %-70s libc text KiB: ' "$call"
  runs "$T/standin.so"
done
printf 'our library (%s), libc text KiB: ' "$LIB"
runs "$LIB"
