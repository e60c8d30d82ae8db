/* Where a trivial program's resident memory is (bench/README.md, "Forty-sixth session"): one
 * malloc/free, then each mapping's Rss from /proc/self/smaps, and with an argument the
 * resident page ranges of the mappings whose line contains it (from /proc/self/pagemap).
 *   gcc -O2 -o /tmp/startup-rss bench/results/startup-rss-2026-12-06.c
 *   /tmp/startup-rss                                        # glibc
 *   LD_PRELOAD=build/src/libtcmalloc_minimal.so /tmp/startup-rss libc.so
 * The fault-around windows (64 KiB, aligned in the virtual address space) move with the
 * mappings' random base, so the page ranges differ a little from run to run. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void resident_ranges(const char *want) {
  FILE *f = fopen("/proc/self/maps", "r");
  int pm = open("/proc/self/pagemap", O_RDONLY);
  char line[512];
  if (f == NULL || pm < 0) return;
  while (fgets(line, sizeof line, f)) {
    unsigned long a, b;
    if (strstr(line, want) == NULL || sscanf(line, "%lx-%lx", &a, &b) != 2) continue;
    printf("%s", line);
    unsigned long run = 0;
    int in_run = 0;
    for (unsigned long x = a; x <= b; x += 4096) {
      uint64_t e = 0;
      int present = x < b && pread(pm, &e, 8, (off_t)(x / 4096 * 8)) == 8 && (e >> 63);
      if (present && !in_run) run = x, in_run = 1;
      if (!present && in_run) {
        printf("  +%lx..+%lx (%lu KiB)\n", run - a, x - a, (x - run) / 1024);
        in_run = 0;
      }
    }
  }
  close(pm);
  fclose(f);
}

int main(int argc, char **argv) {
  void *p = malloc(32);
  free(p);
  FILE *f = fopen("/proc/self/smaps", "r");
  char line[512], name[400] = "";
  long total = 0, kib;
  if (f == NULL) return 1;
  while (fgets(line, sizeof line, f)) {
    unsigned long a, b;
    char perm[8];
    if (sscanf(line, "%lx-%lx %7s", &a, &b, perm) == 3) {
      const char *path = strchr(line, '/');
      snprintf(name, sizeof name, "%s %s", perm, path ? path : (strchr(line, '[') ? strchr(line, '[') : "\n"));
      name[strcspn(name, "\n")] = 0;
    } else if (sscanf(line, "Rss: %ld kB", &kib) == 1 && kib > 0) {
      printf("%6ld %s\n", kib, name);
      total += kib;
    }
  }
  fclose(f);
  printf("%6ld total KiB\n", total);
  if (argc > 1) resident_ranges(argv[1]);
  return 0;
}
