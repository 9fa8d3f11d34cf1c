/* The attention kernels for one element type, included by attention.c with
 *   T     the element type,        SFX  the name suffix (f32, f64),
 *   EXP   a vectorisable exp(T),   SEL  a branch-free select (c, a, b). */

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define FN(name) CAT(name, SFX)

/* Scores of query row i (already scaled: qs = scale * q_i) against keys
 * j0 .. j0+nk-1, whose transposed block kt is [D][BK]: s[jj], with the mask
 * and causal rule applied (-inf where dropped). */
static inline void FN(score_row_)(const pd_attn_geom *g, int64_t b, int64_t h, int64_t i, int64_t j0,
                                  int64_t nk, const T *restrict qs, const T *restrict kt, T *restrict s) {
  for (int64_t jj = 0; jj < nk; jj++) s[jj] = 0;
  for (int64_t d = 0; d < g->D; d++) {
    const T qd = qs[d];
    const T *restrict kr = kt + d * ATTN_BK;
    PD_SIMD for (int64_t jj = 0; jj < nk; jj++) s[jj] += qd * kr[jj];
  }
  if (g->mask_kind != PD_ATTN_MASK_NONE) {
    const int64_t base = b * g->mstride[0] + h * g->mstride[1] + i * g->mstride[2] + j0 * g->mstride[3];
    const int64_t sj = g->mstride[3];
    if (g->mask_kind == PD_ATTN_MASK_BOOL) {
      const uint8_t *m = (const uint8_t *)g->mask + base;
      for (int64_t jj = 0; jj < nk; jj++)
        if (!m[jj * sj]) s[jj] = -INFINITY;
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

/* Packs rows j0..j0+nk-1 of head h of x ([.., S, H, n] with row stride rs)
 * transposed into t[n][ATTN_BK]. */
static inline void FN(pack_t_)(const T *restrict x, int64_t rs, int64_t n, int64_t nk, T *restrict t) {
  for (int64_t jj = 0; jj < nk; jj++) {
    const T *restrict r = x + jj * rs;
    for (int64_t d = 0; d < n; d++) t[d * ATTN_BK + jj] = r[d];
  }
}

/* One forward task: the query block qb of head h of batch b (t enumerates them). */
static int FN(fwd_task_)(const pd_attn_geom *g, const T *q, const T *k, const T *v, T *out, T *lse,
                         int64_t t) {
  const int64_t Sq = g->Sq, Sk = g->Sk, H = g->H, D = g->D, Dv = g->Dv;
  const int64_t nqb = (Sq + ATTN_BQ - 1) / ATTN_BQ;
  const T scale = (T)g->scale;
  {
    const int64_t qb = t % nqb, h = (t / nqb) % H, b = t / (nqb * H);
    const int64_t i0 = qb * ATTN_BQ, nq = Sq - i0 < ATTN_BQ ? Sq - i0 : ATTN_BQ;
    const int64_t kend = g->causal ? (i0 + nq < Sk ? i0 + nq : Sk) : Sk;
    T *buf = malloc(sizeof(T) *
                    (size_t)(ATTN_BQ * ATTN_BK + D * ATTN_BK + ATTN_BQ * Dv + 2 * ATTN_BQ + D + ATTN_BK));
    if (!buf) return -1;
    {
      T *S = buf, *kt = S + ATTN_BQ * ATTN_BK, *acc = kt + D * ATTN_BK, *m = acc + ATTN_BQ * Dv,
        *l = m + ATTN_BQ, *qs = l + ATTN_BQ, *f = qs + D;
      for (int64_t ii = 0; ii < nq; ii++) {
        m[ii] = -INFINITY;
        l[ii] = 0;
      }
      for (int64_t x = 0; x < nq * Dv; x++) acc[x] = 0;
      for (int64_t j0 = 0; j0 < kend; j0 += ATTN_BK) {
        const int64_t nk = kend - j0 < ATTN_BK ? kend - j0 : ATTN_BK;
        FN(pack_t_)(k + ((b * Sk + j0) * H + h) * D, H * D, D, nk, kt);
        for (int64_t ii = 0; ii < nq; ii++) {
          const int64_t i = i0 + ii;
          const T *qr = q + ((b * Sq + i) * H + h) * D;
          for (int64_t d = 0; d < D; d++) qs[d] = qr[d] * scale;
          T *restrict s = S + ii * ATTN_BK;
          FN(score_row_)(g, b, h, i, j0, nk, qs, kt, s);
          T mx = -INFINITY;
          for (int64_t jj = 0; jj < nk; jj++) mx = s[jj] > mx ? s[jj] : mx;
          const T mnew = mx > m[ii] ? mx : m[ii];
          if (mnew == -INFINITY) continue; /* every key so far dropped */
          const T alpha = m[ii] == -INFINITY ? (T)0 : EXP(m[ii] - mnew);
          T sum = 0;
          PD_SIMD for (int64_t jj = 0; jj < nk; jj++) {
            T e = EXP(s[jj] - mnew);
            e = SEL(s[jj] == -INFINITY, (T)0, e);
            s[jj] = e;
            sum += e;
          }
          l[ii] = l[ii] * alpha + sum;
          m[ii] = mnew;
          T *restrict a = acc + ii * Dv;
          if (alpha != (T)1)
            for (int64_t d = 0; d < Dv; d++) a[d] *= alpha;
          if (g->dropout_p > 0) {
            FN(drop_row_)(g, b, h, i, j0, nk, f);
            for (int64_t jj = 0; jj < nk; jj++) s[jj] *= f[jj];
          }
          for (int64_t jj = 0; jj < nk; jj++) {
            const T p = s[jj];
            if (p == 0) continue;
            const T *restrict vr = v + ((b * Sk + j0 + jj) * H + h) * Dv;
            PD_SIMD for (int64_t d = 0; d < Dv; d++) a[d] += p * vr[d];
          }
        }
      }
      for (int64_t ii = 0; ii < nq; ii++) {
        const int64_t i = i0 + ii;
        T *o = out + ((b * Sq + i) * H + h) * Dv;
        const T inv = l[ii] > 0 ? (T)1 / l[ii] : (T)0;
        for (int64_t d = 0; d < Dv; d++) o[d] = acc[ii * Dv + d] * inv;
        lse[(b * H + h) * Sq + i] = l[ii] > 0 ? m[ii] + (T)log((double)l[ii]) : (T)-INFINITY;
      }
      free(buf);
    }
  }
  return 0;
}

int FN(pdk_attention_fwd_)(const pd_attn_geom *g, const T *q, const T *k, const T *v, T *out, T *lse) {
  const int64_t ntask = g->B * g->H * ((g->Sq + ATTN_BQ - 1) / ATTN_BQ);
  const double work = (double)g->B * g->H * g->Sq * g->Sk * (double)(g->D + g->Dv);
  int failed = 0;
  PD_PARALLEL_FOR_IF(work > 2e5 && ntask > 1, t, ntask, {
    if (FN(fwd_task_)(g, q, k, v, out, lse, t)) __atomic_store_n(&failed, 1, __ATOMIC_RELAXED);
  });
  return failed ? -1 : 0;
}

/* One backward task: head h of batch b (t = b * H + h). */
static int FN(bwd_task_)(const pd_attn_geom *g, const T *q, const T *k, const T *v, const T *out,
                         const T *lse, const T *dout, T *dq, T *dk, T *dv, int64_t t) {
  const int64_t Sq = g->Sq, Sk = g->Sk, H = g->H, D = g->D, Dv = g->Dv;
  const T scale = (T)g->scale;
  {
    const int64_t h = t % H, b = t / H;
    T *buf = malloc(sizeof(T) * (size_t)(Sq + 2 * ATTN_BK * (D + Dv) + 3 * ATTN_BK + D));
    if (!buf) return -1;
    {
      T *Di = buf, *kt = Di + Sq, *vt = kt + D * ATTN_BK, *dka = vt + Dv * ATTN_BK, *dva = dka + ATTN_BK * D,
        *s = dva + ATTN_BK * Dv, *dp = s + ATTN_BK, *f = dp + ATTN_BK, *qs = f + ATTN_BK;
      for (int64_t i = 0; i < Sq; i++) {
        const T *o = out + ((b * Sq + i) * H + h) * Dv, *go = dout + ((b * Sq + i) * H + h) * Dv;
        T acc = 0;
        for (int64_t d = 0; d < Dv; d++) acc += o[d] * go[d];
        Di[i] = acc;
        T *gq = dq + ((b * Sq + i) * H + h) * D;
        for (int64_t d = 0; d < D; d++) gq[d] = 0;
      }
      for (int64_t j0 = 0; j0 < Sk; j0 += ATTN_BK) {
        const int64_t nk = Sk - j0 < ATTN_BK ? Sk - j0 : ATTN_BK;
        FN(pack_t_)(k + ((b * Sk + j0) * H + h) * D, H * D, D, nk, kt);
        FN(pack_t_)(v + ((b * Sk + j0) * H + h) * Dv, H * Dv, Dv, nk, vt);
        for (int64_t x = 0; x < nk * D; x++) dka[x] = 0;
        for (int64_t x = 0; x < nk * Dv; x++) dva[x] = 0;
        for (int64_t i = g->causal ? j0 : 0; i < Sq; i++) {
          const T li = lse[(b * H + h) * Sq + i];
          if (li == -INFINITY) continue; /* a fully dropped row: no gradient */
          const T *qr = q + ((b * Sq + i) * H + h) * D, *go = dout + ((b * Sq + i) * H + h) * Dv;
          for (int64_t d = 0; d < D; d++) qs[d] = qr[d] * scale;
          FN(score_row_)(g, b, h, i, j0, nk, qs, kt, s);
          PD_SIMD for (int64_t jj = 0; jj < nk; jj++) {
            T e = EXP(s[jj] - li);
            s[jj] = SEL(s[jj] == -INFINITY, (T)0, e);
          }
          for (int64_t jj = 0; jj < nk; jj++) dp[jj] = 0;
          for (int64_t d = 0; d < Dv; d++) {
            const T gd = go[d];
            const T *restrict vr = vt + d * ATTN_BK;
            PD_SIMD for (int64_t jj = 0; jj < nk; jj++) dp[jj] += gd * vr[jj];
          }
          if (g->dropout_p > 0) {
            FN(drop_row_)(g, b, h, i, j0, nk, f);
          } else {
            for (int64_t jj = 0; jj < nk; jj++) f[jj] = 1;
          }
          const T di = Di[i];
          T *restrict gq = dq + ((b * Sq + i) * H + h) * D;
          for (int64_t jj = 0; jj < nk; jj++) {
            const T p = s[jj];
            if (p == 0) continue;
            const T pd = p * f[jj], ds = p * (dp[jj] * f[jj] - di) * scale;
            T *restrict gv = dva + jj * Dv;
            PD_SIMD for (int64_t d = 0; d < Dv; d++) gv[d] += pd * go[d];
            const T *restrict kr = k + ((b * Sk + j0 + jj) * H + h) * D;
            T *restrict gk = dka + jj * D;
            PD_SIMD for (int64_t d = 0; d < D; d++) {
              gq[d] += ds * kr[d];
              gk[d] += ds * qr[d];
            }
          }
        }
        for (int64_t jj = 0; jj < nk; jj++) {
          T *gk = dk + ((b * Sk + j0 + jj) * H + h) * D, *gv = dv + ((b * Sk + j0 + jj) * H + h) * Dv;
          for (int64_t d = 0; d < D; d++) gk[d] = dka[jj * D + d];
          for (int64_t d = 0; d < Dv; d++) gv[d] = dva[jj * Dv + d];
        }
      }
      free(buf);
    }
  }
  return 0;
}

int FN(pdk_attention_bwd_)(const pd_attn_geom *g, const T *q, const T *k, const T *v, const T *out,
                           const T *lse, const T *dout, T *dq, T *dk, T *dv) {
  const double work = (double)g->B * g->H * g->Sq * g->Sk * (double)(g->D + g->Dv);
  int failed = 0;
  PD_PARALLEL_FOR_IF(work > 1e5 && g->B * g->H > 1, t, g->B * g->H, {
    if (FN(bwd_task_)(g, q, k, v, out, lse, dout, dq, dk, dv, t))
      __atomic_store_n(&failed, 1, __ATOMIC_RELAXED);
  });
  return failed ? -1 : 0;
}

#undef FN
#undef CAT
#undef CAT_
