/* startup_rss: the smallest program that uses malloc the way C programs start (a few small
 * blocks, stdio's buffers), then reports its own resident memory from /proc/self/smaps:
 *   hwm_kib           VmHWM of the process
 *   lib_rss_kib       resident pages of the mappings of the library named in argv[1]
 *   lib_dirty_kib     of which private copies (smaps "Anonymous": relocated or written data,
 *                     bss). Not "Private_Dirty": that also counts file pages still dirty in
 *                     the page cache, i.e. every page of a library built seconds ago.
 *   anon_rss_kib      resident anonymous memory (heap, arena, slabs, pagemap leaves)
 *   libgcc_s_kib      resident pages of libgcc_s's mappings (a C program on glibc maps none)
 *   lib_text_addr     where the library's executable mapping starts (decimal), and
 *   lib_text_rss_kib  its resident pages: with the file in the page cache, the kernel's
 *                     64 KiB fault-around windows that the code which ran falls in
 *   lib_head_rss_kib  resident pages of the read-only mapping before the text (ELF headers,
 *                     dynamic symbols and relocations, then the tables and strings a small
 *                     program reads): likewise the windows of what was read
 *   lib_rodata_rss_kib  resident pages of the read-only mapping after the text (the other
 *                     read-only data, unwind tables)
 *   libc_text_addr    where libc's executable mapping starts (decimal), and
 *   libc_text_rss_kib its resident pages: the windows of libc's code that ran
 * startup_rss_test.py runs it with and without our library preloaded. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long field_kib(const char *line, const char *name) {
  size_t n = strlen(name);
  return strncmp(line, name, n) == 0 ? atol(line + n) : -1;
}

int main(int argc, char **argv) {
  const char *lib = argc > 1 ? argv[1] : "libtcmalloc";
  /* A handful of blocks, as start-up code allocates, kept live to the measurement. */
  void *volatile keep[8];
  for (int i = 0; i < 8; ++i) keep[i] = malloc((size_t)16 << i);
  for (int i = 0; i < 8; ++i)
    if (keep[i] == NULL) return 2;
  FILE *f = fopen("/proc/self/smaps", "r");
  if (f == NULL) return 2;
  char line[512];
  int in_lib = 0, anon = 0, in_libgcc_s = 0, in_lib_text = 0, in_lib_head = 0, in_lib_rodata = 0, seen_text = 0,
      in_libc_text = 0;
  long lib_rss = 0, lib_dirty = 0, anon_rss = 0, libgcc_s_rss = 0, lib_text_rss = 0, lib_head_rss = 0, lib_rodata_rss = 0,
       libc_text_rss = 0, v;
  unsigned long lib_text_addr = 0, libc_text_addr = 0;
  while (fgets(line, sizeof line, f) != NULL) {
    unsigned long lo, hi;
    char perms[8] = "", path[400] = "";
    if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %399s", &lo, &hi, perms, path) >= 2 &&
        strchr(line, '-') < strchr(line, ' ')) {
      in_lib = strstr(path, lib) != NULL;
      in_lib_text = in_lib && perms[2] == 'x';
      if (in_lib_text) lib_text_addr = lo;
      /* The read-only mappings before the text and the first one after it. */
      in_lib_head = in_lib && seen_text == 0 && perms[0] == 'r' && perms[1] == '-' && perms[2] == '-';
      in_lib_rodata = in_lib && seen_text == 1 && perms[0] == 'r' && perms[1] == '-' && perms[2] == '-';
      if (in_lib_text || in_lib_rodata) ++seen_text;
      in_libgcc_s = strstr(path, "libgcc_s") != NULL;
      in_libc_text = strstr(path, "/libc.so") != NULL && perms[2] == 'x';
      if (in_libc_text) libc_text_addr = lo;
      anon = path[0] == '\0';
      continue;
    }
    if ((v = field_kib(line, "Rss:")) >= 0) {
      if (in_lib) lib_rss += v;
      if (in_lib_text) lib_text_rss += v;
      if (in_lib_head) lib_head_rss += v;
      if (in_lib_rodata) lib_rodata_rss += v;
      if (anon) anon_rss += v;
      if (in_libgcc_s) libgcc_s_rss += v;
      if (in_libc_text) libc_text_rss += v;
    } else if ((v = field_kib(line, "Anonymous:")) >= 0 && in_lib) {
      lib_dirty += v;
    }
  }
  fclose(f);
  long hwm = -1;
  f = fopen("/proc/self/status", "r");
  if (f == NULL) return 2;
  while (fgets(line, sizeof line, f) != NULL)
    if ((v = field_kib(line, "VmHWM:")) >= 0) hwm = v;
  fclose(f);
  printf("hwm_kib=%ld lib_rss_kib=%ld lib_dirty_kib=%ld anon_rss_kib=%ld libgcc_s_kib=%ld lib_text_addr=%lu "
         "lib_text_rss_kib=%ld lib_head_rss_kib=%ld lib_rodata_rss_kib=%ld libc_text_addr=%lu libc_text_rss_kib=%ld\n",
         hwm, lib_rss, lib_dirty, anon_rss, libgcc_s_rss, lib_text_addr, lib_text_rss, lib_head_rss, lib_rodata_rss,
         libc_text_addr, libc_text_rss);
  for (int i = 0; i < 8; ++i) free(keep[i]);
  return 0;
}
