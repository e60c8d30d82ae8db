/* Deprecated location kept for old code: include <gperftools/malloc_extension.h> instead. */
#warning "google/malloc_extension.h is deprecated. Use gperftools/malloc_extension.h instead"
#include <gperftools/malloc_extension.h>
