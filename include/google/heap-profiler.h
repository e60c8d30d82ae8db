/* Deprecated location kept for old code: include <gperftools/heap-profiler.h> instead. */
#warning "google/heap-profiler.h is deprecated. Use gperftools/heap-profiler.h instead"
#include <gperftools/heap-profiler.h>
