/* Deprecated location kept for old code: include <gperftools/malloc_extension_c.h> instead. */
#warning "google/malloc_extension_c.h is deprecated. Use gperftools/malloc_extension_c.h instead"
#include <gperftools/malloc_extension_c.h>
