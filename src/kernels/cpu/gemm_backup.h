/* Large float32 products while other processes compete for the cores
 * (gemm_backup.c): the calling thread and helper threads take panels of C,
 * and the caller computes again ("backs up") a panel whose helper has lost
 * its core instead of waiting for it. */
#ifndef PADDLEC_KERNELS_GEMM_BACKUP_H
#define PADDLEC_KERNELS_GEMM_BACKUP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* What keeps a product's inputs alive: a helper that lost its core may
 * still be reading A and B after the product has returned (its result is
 * then discarded), so it holds a reference to their owners until it is
 * done. obj[i] may be NULL. */
typedef struct pdk_gemm_keep {
  void (*retain)(void *obj);
  void (*release)(void *obj);
  void *obj[2];
} pdk_gemm_keep;

/* The owners of A and B of the products the calling thread runs next, or
 * NULL. Only products whose caller said so take the backup path; the
 * others run as panels of an OpenMP team (gemm.c). Not copied: k must stay
 * valid until it is replaced. */
void pdk_gemm_keep_inputs(const pdk_gemm_keep *k);
const pdk_gemm_keep *pdk_gemm_kept_inputs(void);

/* C = alpha * op(A) op(B) + beta * C cut into np panels along C's columns
 * (by_cols) or rows, shared by the calling thread and up to `helpers`
 * helper threads. Returns 0, oneDNN's status of a failed panel, or -1 when
 * no helper thread could be started (nothing was computed). */
int pdk_gemm_backup_f32(bool transa, bool transb, int64_t M, int64_t N, int64_t K, float alpha,
                        const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                        int64_t ldc, bool by_cols, int np, int helpers, const pdk_gemm_keep *keep);

/* Counters for tests and benches: products run this way, panels the caller
 * backed up, panels a helper computed and committed. */
extern atomic_llong pd_g_gemm_backup_products, pd_g_gemm_backups, pd_g_gemm_helper_panels;
/* Tests: microseconds each helper sleeps before computing a panel (a helper
 * that has lost its core), 0 normally. */
extern atomic_int pd_g_gemm_helper_delay_us;

#endif
