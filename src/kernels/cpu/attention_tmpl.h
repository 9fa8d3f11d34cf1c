/* The attention kernels for one element type, included by attention.c with
 *   T     the element type,  SFX   the name suffix (f32, f64),
 *   EXP   a vectorisable e^x for x <= 0 (0 at -inf, NaN kept),
 *   GEMM  a product with gemm.h's arguments that runs on the calling
 *         thread, or whose bits do not depend on the thread count.
 *
 * The products of a block are GEMMs on the [B, S, H, D] tensors in place: a
 * head's rows are H * D (or H * Dv) elements apart, which is the leading
 * dimension. Each task (a block of query rows forward, a head backward) does
 * its products and additions in an order fixed by the shape, so the results
 * have the same bits on any number of threads. */

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define FN(name) CAT(name, SFX)

/* The mask and the causal rule on row i of a block of scores, s[jj] for key
 * j0 + jj: -inf where the pair is dropped, the additive mask added. */
static inline void FN(mask_row_)(const pd_attn_geom *g, int64_t b, int64_t h, int64_t i, int64_t j0,
                                 int64_t nk, T *restrict s) {
  if (g->mask_kind != PD_ATTN_MASK_NONE) {
    const int64_t base = b * g->mstride[0] + h * g->mstride[1] + i * g->mstride[2] + j0 * g->mstride[3];
    const int64_t sj = g->mstride[3];
    if (g->mask_kind == PD_ATTN_MASK_BOOL) {
      const uint8_t *m = (const uint8_t *)g->mask + base;
      for (int64_t jj = 0; jj < nk; jj++)
        if (!m[jj * sj]) s[jj] = -INFINITY;
    } else if (sj == 1) {
      const T *restrict m = (const T *)g->mask + base;
      PD_SIMD for (int64_t jj = 0; jj < nk; jj++) s[jj] += m[jj];
    } else {
      const T *m = (const T *)g->mask + base;
      for (int64_t jj = 0; jj < nk; jj++) s[jj] += m[jj * sj];
    }
  }
  if (g->causal && j0 + nk - 1 > i)
    for (int64_t jj = i - j0 + 1 < 0 ? 0 : i - j0 + 1; jj < nk; jj++) s[jj] = -INFINITY;
}

/* Dropout factors of row i for keys j0..j0+nk-1: 0 (dropped) or 1/(1-p). */
static void FN(drop_row_)(const pd_attn_geom *g, int64_t b, int64_t h, int64_t i, int64_t j0, int64_t nk,
                          T *restrict f) {
  const double p = g->dropout_p;
  const T keep = (T)(1.0 / (1.0 - p));
  const uint64_t e0 = (uint64_t)(((b * g->H + h) * g->Sq + i) * g->Sk + j0);
  uint32_t w[4];
  uint64_t cur = UINT64_MAX;
  for (int64_t jj = 0; jj < nk; jj++) {
    uint64_t e = e0 + (uint64_t)jj;
    if (e / 4 != cur) {
      cur = e / 4;
      pd_philox(g->rng_first + cur, g->rng_key, w);
    }
    f[jj] = (double)pd_u32_to_unit_f32(w[e % 4]) >= p ? keep : (T)0;
  }
}

/* Keys of the block j0 .. j0+nk-1 that rows up to i (of a chunk ending at
 * row i) may see: all of them, or under the causal rule those up to i. */
static inline int64_t FN(keys_seen_)(const pd_attn_geom *g, int64_t i, int64_t j0, int64_t nk) {
  return g->causal && i + 1 - j0 < nk ? i + 1 - j0 : nk;
}

/* Rows per product where a block of keys crosses the causal diagonal: each
 * chunk of rows is multiplied with only the keys its last row sees. */
static inline int64_t FN(chunk_rows_)(const pd_attn_geom *g, int64_t i0, int64_t nq, int64_t j0, int64_t nk) {
  return g->causal && j0 + nk - 1 > i0 ? ATTN_CHUNK : nq;
}

/* The online softmax of rows r0 .. r1-1 of a forward block over its nk keys
 * (scores in S): running max m and sum l updated, the accumulator rescaled
 * when the max grows, and the scores replaced by the unnormalised
 * probabilities times the dropout factors. */
static inline void FN(softmax_rows_)(const pd_attn_geom *g, int64_t b, int64_t h, int64_t i0, int64_t r0,
                                     int64_t r1, int64_t j0, int64_t nk, T *S, T *acc, T *m, T *l, T *f) {
  const int64_t Dv = g->Dv;
  for (int64_t ii = r0; ii < r1; ii++) {
    const int64_t i = i0 + ii;
    T *restrict s = S + ii * ATTN_BK;
    FN(mask_row_)(g, b, h, i, j0, nk, s);
    T mx = -INFINITY;
    _Pragma("omp simd reduction(max : mx)") for (int64_t jj = 0; jj < nk; jj++) mx = s[jj] > mx ? s[jj] : mx;
    const T mnew = mx > m[ii] ? mx : m[ii];
    if (mnew == -INFINITY) { /* every key so far dropped: this block adds nothing */
      for (int64_t jj = 0; jj < nk; jj++) s[jj] = 0;
      continue;
    }
    const T alpha = EXP(m[ii] - mnew); /* 0 while m[ii] is -inf */
    T sum = 0;
    _Pragma("omp simd reduction(+ : sum)") for (int64_t jj = 0; jj < nk; jj++) {
      const T e = EXP(s[jj] - mnew);
      s[jj] = e;
      sum += e;
    }
    l[ii] = l[ii] * alpha + sum;
    m[ii] = mnew;
    if (alpha != (T)1) {
      T *restrict a = acc + ii * Dv;
      PD_SIMD for (int64_t d = 0; d < Dv; d++) a[d] *= alpha;
    }
    if (g->dropout_p > 0) {
      FN(drop_row_)(g, b, h, i, j0, nk, f);
      PD_SIMD for (int64_t jj = 0; jj < nk; jj++) s[jj] *= f[jj];
    }
  }
}

/* One forward task: the query block qb of head h of batch b (t enumerates
 * them). Per block of keys (and chunk of rows, on the causal diagonal):
 * S = scale * Q K^T (one product), the mask and an online softmax row by
 * row (softmax_rows_), then acc += P V (one product). buf: FWD_SCRATCH
 * elements. */
static int FN(fwd_task_)(const pd_attn_geom *g, const T *q, const T *k, const T *v, T *out, T *lse, T *buf,
                         int64_t t) {
  const int64_t Sq = g->Sq, Sk = g->Sk, H = g->H, D = g->D, Dv = g->Dv, ldq = H * D, ldv = H * Dv;
  const int64_t nqb = (Sq + ATTN_BQ - 1) / ATTN_BQ;
  const int64_t qb = t % nqb, h = (t / nqb) % H, b = t / (nqb * H);
  const int64_t i0 = qb * ATTN_BQ, nq = Sq - i0 < ATTN_BQ ? Sq - i0 : ATTN_BQ;
  const int64_t kend = g->causal ? (i0 + nq < Sk ? i0 + nq : Sk) : Sk;
  const T *qblk = q + ((b * Sq + i0) * H + h) * D;
  T *S = buf, *acc = S + ATTN_BQ * ATTN_BK, *m = acc + ATTN_BQ * Dv, *l = m + ATTN_BQ, *f = l + ATTN_BQ;
  int failed = 0;
  for (int64_t ii = 0; ii < nq; ii++) {
    m[ii] = -INFINITY;
    l[ii] = 0;
  }
  for (int64_t x = 0; x < nq * Dv; x++) acc[x] = 0;
  for (int64_t j0 = 0; j0 < kend && !failed; j0 += ATTN_BK) {
    const int64_t nk = kend - j0 < ATTN_BK ? kend - j0 : ATTN_BK, step = FN(chunk_rows_)(g, i0, nq, j0, nk);
    const T *kblk = k + ((b * Sk + j0) * H + h) * D, *vblk = v + ((b * Sk + j0) * H + h) * Dv;
    for (int64_t r0 = 0; r0 < nq && !failed; r0 += step) {
      const int64_t r1 = r0 + step < nq ? r0 + step : nq, nkc = FN(keys_seen_)(g, i0 + r1 - 1, j0, nk);
      if (nkc <= 0) continue; /* these rows see none of the keys */
      T *Sr = S + r0 * ATTN_BK;
      failed =
          GEMM(false, true, r1 - r0, nkc, D, (T)g->scale, qblk + r0 * ldq, ldq, kblk, ldq, 0, Sr, ATTN_BK);
      if (failed) break;
      FN(softmax_rows_)(g, b, h, i0, r0, r1, j0, nkc, S, acc, m, l, f);
      failed = GEMM(false, false, r1 - r0, Dv, nkc, 1, Sr, ATTN_BK, vblk, ldv, 1, acc + r0 * Dv, Dv);
    }
  }
  for (int64_t ii = 0; ii < nq && !failed; ii++) {
    const int64_t i = i0 + ii;
    T *o = out + ((b * Sq + i) * H + h) * Dv;
    if (l[ii] > 0) { /* else every key dropped: 0 */
      const T inv = (T)1 / l[ii], *restrict a = acc + ii * Dv;
      PD_SIMD for (int64_t d = 0; d < Dv; d++) o[d] = a[d] * inv;
    } else {
      memset(o, 0, sizeof(T) * (size_t)Dv);
    }
    lse[(b * H + h) * Sq + i] = l[ii] > 0 ? m[ii] + (T)log((double)l[ii]) : (T)-INFINITY;
  }
  return failed ? -1 : 0;
}

#define FWD_SCRATCH(g) (ATTN_BQ * ATTN_BK + ATTN_BQ * (g)->Dv + 2 * ATTN_BQ + ATTN_BK)

int FN(pdk_attention_fwd_)(const pd_attn_geom *g, const T *q, const T *k, const T *v, T *out, T *lse) {
  const int64_t ntask = g->B * g->H * ((g->Sq + ATTN_BQ - 1) / ATTN_BQ);
  const double work = (double)g->B * g->H * g->Sq * g->Sk * (double)(g->D + g->Dv);
  int failed = 0;
  ATTN_TASKS(work > 2e5 && ntask > 1, ntask, T, FWD_SCRATCH(g), failed, t, buf,
             FN(fwd_task_)(g, q, k, v, out, lse, buf, t));
  return failed ? -1 : 0;
}

/* Rows of a head's block that a backward block works on: P (softmax
 * probabilities recomputed from the scores in s and the saved lse) and, from
 * dP = dO V^T in dp, dS = P * (dP * f - D_i) into dp and P * f (f the
 * dropout factors) into s. A row whose keys were all dropped (lse -inf) is
 * zero in both. */
static inline void FN(bwd_rows_)(const pd_attn_geom *g, int64_t b, int64_t h, int64_t i0, int64_t nq,
                                 int64_t j0, int64_t nk, const T *lse, const T *Di, T *S, T *dP, T *f) {
  for (int64_t ii = 0; ii < nq; ii++) {
    const int64_t i = i0 + ii;
    T *restrict s = S + ii * ATTN_BWD_BK, *restrict dp = dP + ii * ATTN_BWD_BK;
    const T li = lse[(b * g->H + h) * g->Sq + i];
    if (li == -INFINITY) {
      for (int64_t jj = 0; jj < nk; jj++) s[jj] = dp[jj] = 0;
      continue;
    }
    FN(mask_row_)(g, b, h, i, j0, nk, s);
    const T di = Di[i];
    if (g->dropout_p > 0) {
      FN(drop_row_)(g, b, h, i, j0, nk, f);
      PD_SIMD for (int64_t jj = 0; jj < nk; jj++) {
        const T p = EXP(s[jj] - li);
        dp[jj] = p * (dp[jj] * f[jj] - di);
        s[jj] = p * f[jj];
      }
    } else {
      PD_SIMD for (int64_t jj = 0; jj < nk; jj++) {
        const T p = EXP(s[jj] - li);
        dp[jj] = p * (dp[jj] - di);
        s[jj] = p;
      }
    }
  }
}

/* n rows of w elements, ld apart, set to 0. */
static void FN(zero_rows_)(T *x, int64_t n, int64_t ld, int64_t w) {
  for (int64_t r = 0; r < n; r++) memset(x + r * ld, 0, sizeof(T) * (size_t)w);
}

/* One backward task: head h of batch b (t = b * H + h). Per block of keys,
 * over the blocks of queries that can see it (and chunks of rows, on the
 * causal diagonal): S = scale * Q K^T and
 * dP = dO V^T (products), the rows (bwd_rows_), then dV += (P f)^T dO,
 * dQ += scale * dS K and dK += scale * dS^T Q (products accumulating into the
 * outputs, which this task alone writes for its head). buf: BWD_SCRATCH
 * elements. */
static int FN(bwd_task_)(const pd_attn_geom *g, const T *q, const T *k, const T *v, const T *out,
                         const T *lse, const T *dout, T *dq, T *dk, T *dv, T *buf, int64_t t) {
  const int64_t Sq = g->Sq, Sk = g->Sk, H = g->H, D = g->D, Dv = g->Dv, ldq = H * D, ldv = H * Dv;
  const int64_t h = t % H, b = t / H;
  const T scale = (T)g->scale;
  T *Di = buf, *S = Di + Sq, *dP = S + ATTN_BWD_BQ * ATTN_BWD_BK, *f = dP + ATTN_BWD_BQ * ATTN_BWD_BK;
  for (int64_t i = 0; i < Sq; i++) {
    const T *o = out + ((b * Sq + i) * H + h) * Dv, *go = dout + ((b * Sq + i) * H + h) * Dv;
    T acc = 0;
    _Pragma("omp simd reduction(+ : acc)") for (int64_t d = 0; d < Dv; d++) acc += o[d] * go[d];
    Di[i] = acc;
  }
  if (Sk == 0) FN(zero_rows_)(dq + (b * Sq * H + h) * D, Sq, ldq, D);
  int failed = 0;
  for (int64_t j0 = 0; j0 < Sk && !failed; j0 += ATTN_BWD_BK) {
    const int64_t nk = Sk - j0 < ATTN_BWD_BK ? Sk - j0 : ATTN_BWD_BK;
    const int64_t jo = (b * Sk + j0) * H + h;
    const T *kblk = k + jo * D, *vblk = v + jo * Dv;
    T *dkblk = dk + jo * D, *dvblk = dv + jo * Dv;
    /* causal: rows above j0 see none of these keys */
    const int64_t istart = g->causal ? j0 / ATTN_BWD_BQ * ATTN_BWD_BQ : 0;
    /* The first product into a block of dk and dv writes it (beta 0), the
     * rest add; when the first block of queries is cut into chunks of rows
     * that see fewer keys, or there is none, the block is zeroed first. */
    const bool zero_kv = istart >= Sq || (g->causal && j0 + nk - 1 > istart);
    if (zero_kv) {
      FN(zero_rows_)(dkblk, nk, ldq, D);
      FN(zero_rows_)(dvblk, nk, ldv, Dv);
    }
    for (int64_t i0 = istart; i0 < Sq && !failed; i0 += ATTN_BWD_BQ) {
      const int64_t nq = Sq - i0 < ATTN_BWD_BQ ? Sq - i0 : ATTN_BWD_BQ,
                    step = FN(chunk_rows_)(g, i0, nq, j0, nk);
      /* every block of queries meets the keys from j0 = 0 (causal or not), all its rows */
      const T beta_kv = i0 == istart && !zero_kv ? 0 : 1, beta_q = j0 == 0 ? 0 : 1;
      for (int64_t r0 = 0; r0 < nq && !failed; r0 += step) {
        const int64_t r1 = r0 + step < nq ? r0 + step : nq, nr = r1 - r0;
        const int64_t nkc = FN(keys_seen_)(g, i0 + r1 - 1, j0, nk);
        if (nkc <= 0) continue; /* these rows see none of the keys */
        const int64_t io = (b * Sq + i0 + r0) * H + h;
        const T *qblk = q + io * D, *goblk = dout + io * Dv;
        failed = GEMM(false, true, nr, nkc, D, scale, qblk, ldq, kblk, ldq, 0, S, ATTN_BWD_BK) ||
                 GEMM(false, true, nr, nkc, Dv, 1, goblk, ldv, vblk, ldv, 0, dP, ATTN_BWD_BK);
        if (failed) break;
        FN(bwd_rows_)(g, b, h, i0 + r0, nr, j0, nkc, lse, Di, S, dP, f);
        failed =
            GEMM(true, false, nkc, Dv, nr, 1, S, ATTN_BWD_BK, goblk, ldv, beta_kv, dvblk, ldv) ||
            GEMM(false, false, nr, D, nkc, scale, dP, ATTN_BWD_BK, kblk, ldq, beta_q, dq + io * D, ldq) ||
            GEMM(true, false, nkc, D, nr, scale, dP, ATTN_BWD_BK, qblk, ldq, beta_kv, dkblk, ldq);
      }
    }
  }
  return failed ? -1 : 0;
}

#define BWD_SCRATCH(g) ((g)->Sq + 2 * ATTN_BWD_BQ * ATTN_BWD_BK + ATTN_BWD_BK)

int FN(pdk_attention_bwd_)(const pd_attn_geom *g, const T *q, const T *k, const T *v, const T *out,
                           const T *lse, const T *dout, T *dq, T *dk, T *dv) {
  const double work = (double)g->B * g->H * g->Sq * g->Sk * (double)(g->D + g->Dv);
  int failed = 0;
  ATTN_TASKS(work > 1e5 && g->B * g->H > 1, g->B * g->H, T, BWD_SCRATCH(g), failed, t, buf,
             FN(bwd_task_)(g, q, k, v, out, lse, dout, dq, dk, dv, buf, t));
  return failed ? -1 : 0;
}

#undef FWD_SCRATCH
#undef BWD_SCRATCH
#undef FN
#undef CAT
#undef CAT_
