/* Deprecated location kept for old code: include <gperftools/heap-checker.h> instead. */
#warning "google/heap-checker.h is deprecated. Use gperftools/heap-checker.h instead"
#include <gperftools/heap-checker.h>
