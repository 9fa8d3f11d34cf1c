/* Flash-style attention kernels (see attention.h); the bodies are in
 * attention_tmpl.h, instantiated for float32 and float64, their products
 * through the GEMM of gemm.h.
 *
 * Block sizes: a forward task holds a block of scores ATTN_BQ x ATTN_BK and
 * its accumulator ATTN_BQ x Dv; a backward task the scores and their
 * gradient, two blocks of ATTN_BWD_BQ x ATTN_BWD_BK, and one value per query
 * row of its head. Memory stays O(block) per task however long the
 * sequence; the key blocks (BK x D of k and of v) stay in cache while the
 * query block is worked on. */
#include "attention.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/core_internal.h"
#include "gemm.h"
#include "parallel.h"
#include "vmath.h"

#define ATTN_BQ 128
#define ATTN_BK 256
#define ATTN_BWD_BQ 128
#define ATTN_BWD_BK 128
/* Under the causal rule a block of keys that crosses the diagonal is
 * multiplied in chunks of this many query rows, each with only the keys its
 * last row sees: about 5/8 of the block's work instead of all of it. */
#define ATTN_CHUNK 32

/* for (t = 0; t < n; t++) failed |= call != 0, over the threads when cond
 * holds (and the thread governor allows), each thread with its own scratch
 * buf of `elems` elements of type T, allocated once per call: a task's
 * buffers are larger than malloc's mmap threshold, and mapping and zeroing
 * fresh pages per task cost more than the small products themselves. The
 * tasks are taken one at a time (under the causal rule they differ in
 * cost); each computes its own outputs alone, so the bits do not depend on
 * which thread ran it. */
#define ATTN_TASKS(cond, n, T, elems, failed, t, buf, call)                      \
  do {                                                                           \
    const bool par_ = (cond) && pd_team_for_large_tasks() && !omp_in_parallel(); \
    const int64_t n_ = (n);                                                      \
    const size_t bytes_ = sizeof(T) * (size_t)(elems);                           \
    _Pragma("omp parallel if (par_) reduction(| : failed)") {                    \
      T *buf = malloc(bytes_);                                                   \
      failed |= !buf;                                                            \
      _Pragma("omp for schedule(dynamic)") for (int64_t t = 0; t < n_; t++) {    \
        if (buf && (call)) failed = 1;                                           \
      }                                                                          \
      free(buf);                                                                 \
    }                                                                            \
  } while (0)

/* float32: each product on the task's own thread, its bits fixed by the
 * shape (gemm.h); float64's GEMM computes every element on one thread in
 * a fixed order, on any number of threads. */
#define T float
#define SFX f32
#define EXP pd_vexpf_nonpos
#define GEMM pdk_gemm_f32_serial
#include "attention_tmpl.h"
#undef T
#undef SFX
#undef EXP
#undef GEMM

#define T double
#define SFX f64
#define EXP exp
#define GEMM pdk_gemm_f64
#include "attention_tmpl.h"
#undef T
#undef SFX
#undef EXP
#undef GEMM
