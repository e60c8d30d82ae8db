/* Deprecated location kept for old code: include <gperftools/tcmalloc.h> instead. */
#warning "google/tcmalloc.h is deprecated. Use gperftools/tcmalloc.h instead"
#include <gperftools/tcmalloc.h>
