/* Deprecated location kept for old code: include <gperftools/nallocx.h> instead. */
#warning "google/nallocx.h is deprecated. Use gperftools/nallocx.h instead"
#include <gperftools/nallocx.h>
