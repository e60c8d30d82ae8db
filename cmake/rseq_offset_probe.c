/* Build-time probe (CMakeLists.txt): prints where this machine's glibc keeps its rseq area,
 * as an offset from the thread pointer, so the per-CPU fast paths can spell it as a
 * constant. Prints nothing (and the build uses the offset it loads at run time) when glibc
 * has no rseq support or did not register an area. */
#include <stdio.h>
#include <sys/rseq.h>

int main(void) {
  if (__rseq_size > 0) printf("%td", __rseq_offset);
  return 0;
}
