/* nallocx(): the size an allocation of `size` really gets, as in jemalloc and gperftools. */
#ifndef TCMALLOC_NALLOCX_H_
#define TCMALLOC_NALLOCX_H_
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif
/* Bits 0..5 of flags hold log2 of the required alignment (0 = default). */
#define MALLOCX_LG_ALIGN(la) ((int)(la))
__attribute__((visibility("default"))) size_t nallocx(size_t size, int flags)
#ifdef __cplusplus
    noexcept
#endif
    ;
#ifdef __cplusplus
}
#endif
#endif /* TCMALLOC_NALLOCX_H_ */
