/* Deprecated location kept for old code: include <gperftools/malloc_hook.h> instead. */
#warning "google/malloc_hook.h is deprecated. Use gperftools/malloc_hook.h instead"
#include <gperftools/malloc_hook.h>
