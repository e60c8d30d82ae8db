/* Deprecated location kept for old code: include <gperftools/stacktrace.h> instead. */
#warning "google/stacktrace.h is deprecated. Use gperftools/stacktrace.h instead"
#include <gperftools/stacktrace.h>
