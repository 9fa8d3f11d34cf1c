/* C = alpha * A * B^T + beta * C through oneDNN's matmul primitive.
 *
 * Creating a primitive descriptor walks oneDNN's implementation list (tens of
 * microseconds), so each (shape, leading dimensions, alpha, beta, threads)
 * keeps its primitive in a small cache, immutable once published: only the
 * lookup takes the mutex. The primitive runs with a user-managed scratchpad
 * from the caching allocator, so one primitive may run on several threads at
 * once. alpha is the primitive's output scale, beta a sum post-op (beta == 0:
 * C's old contents, NaN too, are not read). */
#include "gemm_dnnl_matmul.h"

#include <omp.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/alloc.h"
#include "dnnl_shared.h"

#define KEYLEN 9
#define MAX_ENTRIES 256

typedef struct mentry {
  pdk_dnnl_cached head; /* key: M, N, K, lda, ldb, ldc, alpha's and beta's bits, threads */
  dnnl_primitive_t prim;
  dnnl_memory_desc_t md[3]; /* A, B (as K x N with strides 1, ldb), C */
  dnnl_memory_desc_t scratch_md;
  size_t scratch;
} mentry;

static void entry_free(pdk_dnnl_cached *c) {
  mentry *e = (mentry *)c;
  if (!e) return;
  if (e->prim) dnnl_primitive_destroy(e->prim);
  free(e);
}

static pdk_dnnl_cache g_cache = PDK_DNNL_CACHE_INIT(KEYLEN, MAX_ENTRIES, entry_free);
static atomic_long g_products;

long pdk_gemm_matmul_products(void) { return atomic_load(&g_products); }

/* A new entry for key k (its primitive made), or NULL when oneDNN cannot. */
static mentry *entry_new(const int64_t *k, float alpha, float beta) {
  mentry *e = calloc(1, sizeof *e);
  if (!e) return NULL;
  memcpy(e->head.key, k, sizeof(int64_t) * KEYLEN);
  int64_t M = k[0], N = k[1], K = k[2], lda = k[3], ldb = k[4], ldc = k[5];
  dnnl_dims_t da = {M, K}, db = {K, N}, dc = {M, N};
  dnnl_dims_t sa = {lda, 1}, sb = {1, ldb}, sc = {ldc, 1};
  dnnl_primitive_attr_t attr = NULL;
  dnnl_post_ops_t po = NULL;
  dnnl_primitive_desc_t pd = NULL;
  bool ok = dnnl_memory_desc_init_by_strides(&e->md[0], 2, da, dnnl_f32, sa) == dnnl_success &&
            dnnl_memory_desc_init_by_strides(&e->md[1], 2, db, dnnl_f32, sb) == dnnl_success &&
            dnnl_memory_desc_init_by_strides(&e->md[2], 2, dc, dnnl_f32, sc) == dnnl_success &&
            dnnl_primitive_attr_create(&attr) == dnnl_success &&
            dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success;
  if (ok && alpha != 1.0f) ok = dnnl_primitive_attr_set_output_scales(attr, 1, 0, &alpha) == dnnl_success;
  if (ok && beta != 0.0f)
    ok = dnnl_post_ops_create(&po) == dnnl_success && dnnl_post_ops_append_sum(po, beta) == dnnl_success &&
         dnnl_primitive_attr_set_post_ops(attr, po) == dnnl_success;
  dnnl_matmul_desc_t desc;
  ok = ok && dnnl_matmul_desc_init(&desc, &e->md[0], &e->md[1], NULL, &e->md[2]) == dnnl_success &&
       dnnl_primitive_desc_create(&pd, &desc, attr, pdk_dnnl_engine(), NULL) == dnnl_success;
  if (ok) {
    e->scratch = pdk_dnnl_scratch_of(pd, &e->scratch_md);
    ok = dnnl_primitive_create(&e->prim, pd) == dnnl_success;
  }
  if (pd) dnnl_primitive_desc_destroy(pd);
  if (po) dnnl_post_ops_destroy(po);
  if (attr) dnnl_primitive_attr_destroy(attr);
  if (!ok) {
    entry_free(&e->head);
    return NULL;
  }
  return e;
}

/* The cached entry for k (made and published on first use); past the
 * cache's size an unpublished one the caller frees (*owned). */
static mentry *lookup(const int64_t *k, float alpha, float beta, bool *owned) {
  *owned = false;
  pdk_dnnl_cached *c = pdk_dnnl_cache_find(&g_cache, k);
  if (c) return (mentry *)c;
  mentry *e = entry_new(k, alpha, beta);
  return e ? (mentry *)pdk_dnnl_cache_publish(&g_cache, &e->head, owned) : NULL;
}

int pdk_gemm_f32_matmul_nt(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                           const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
  if (!pdk_dnnl_engine()) return -1;
  int64_t k[KEYLEN] = {M, N, K, lda, ldb, ldc, 0, 0, omp_get_max_threads()};
  memcpy(&k[6], &alpha, sizeof alpha);
  memcpy(&k[7], &beta, sizeof beta);
  bool owned;
  mentry *e = lookup(k, alpha, beta, &owned);
  if (!e) return -1;
  dnnl_stream_t s = pdk_dnnl_stream_acquire();
  void *scratch = e->scratch && s ? pd_alloc(e->scratch) : NULL;
  void *ptr[3] = {(void *)A, (void *)B, C};
  dnnl_memory_t m[3] = {NULL, NULL, NULL};
  bool ready = s && (!e->scratch || scratch);
  for (int i = 0; i < 3 && ready; i++)
    ready = dnnl_memory_create(&m[i], &e->md[i], pdk_dnnl_engine(), ptr[i]) == dnnl_success;
  int rc = -1;
  if (ready) {
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, m[0]}, {DNNL_ARG_WEIGHTS, m[1]}, {DNNL_ARG_DST, m[2]}};
    dnnl_status_t st = pdk_dnnl_exec(e->prim, s, 3, args, &e->scratch_md, e->scratch, scratch);
    rc = st == dnnl_success ? 0 : (int)st;
    if (rc == 0) atomic_fetch_add_explicit(&g_products, 1, memory_order_relaxed);
  }
  for (int i = 0; i < 3; i++)
    if (m[i]) dnnl_memory_destroy(m[i]);
  if (scratch) pd_free(scratch, e->scratch);
  pdk_dnnl_stream_release(s);
  if (owned) entry_free(&e->head);
  return rc;
}
