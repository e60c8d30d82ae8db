/* Which pages of our library and of the anonymous mappings are resident when a program
 * exits (bench/README.md, "Forty-seventh session"): preloaded in front of the allocator, a
 * destructor prints each mapping of a library whose path contains "tcmalloc", and each
 * anonymous one, with the offsets of its resident pages (/proc/self/pagemap).
 *   gcc -O2 -shared -fPIC -o /tmp/pgdump.so bench/results/text-pages-2026-12-07.c
 *   LD_PRELOAD="/tmp/pgdump.so build/src/libtcmalloc_minimal.so" build/bench/fastpath pair 32 1
 * The mapping at lib+7000 is the text: its page count times 4 is the KiB resident. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
__attribute__((destructor)) static void dump(void) {
  FILE *f = fopen("/proc/self/maps", "r"); int pm = open("/proc/self/pagemap", O_RDONLY);
  char line[512]; unsigned long lib = 0;
  while (fgets(line, sizeof line, f)) {
    unsigned long a, b; if (sscanf(line, "%lx-%lx", &a, &b) != 2) continue;
    int named = strchr(line, '/') != NULL || strchr(line, '[') != NULL;
    if (strstr(line, "tcmalloc") && !lib) lib = a;
    if (named && !strstr(line, "tcmalloc")) continue;
    fprintf(stderr, "%lx-%lx lib+%lx %s", a, b, lib ? a - lib : 0, named ? strchr(line, '/') : "anon\n");
    for (unsigned long x = a; x < b; x += 4096) { uint64_t e = 0; pread(pm, &e, 8, (off_t)(x / 4096 * 8)); if (e >> 63) fprintf(stderr, " %lx", x - a); }
    fprintf(stderr, "\n");
  }
}
