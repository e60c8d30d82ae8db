// The static archive's form of heap_check_start_main.cc (see there): linked with
// --wrap=__libc_start_main instead of interposing the symbol.
#define TCM_HEAPCHECK_WRAP 1
#include "heapcheck/heap_check_start_main.cc"
