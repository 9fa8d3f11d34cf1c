/* The caching allocator: what the kernels may use for scratch memory
 * without the tensor struct. Internal. */
#ifndef PADDLEC_ALLOC_H
#define PADDLEC_ALLOC_H

#include <stdbool.h>
#include <stddef.h>

/* Caching allocator (64-byte aligned). */
void *pd_alloc(size_t nbytes);
void pd_free(void *p, size_t nbytes);
/* Counts bytes held outside pd_alloc (inline payloads) as allocated. */
void pd_alloc_account(size_t bytes, bool add);

#endif
