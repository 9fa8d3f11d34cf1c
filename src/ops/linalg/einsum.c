/* einsum: a composite of public ops (sum, transpose, reshape, matmul), so it
 * is differentiable through its parts. Operands are contracted left to right;
 * each pairwise contraction becomes one batched matmul:
 *   A -> [batch, free_A, contracted], B -> [batch, contracted, free_B]
 * (or the transposed arrangement when that is the operand's own order, so
 * no copy is made), labels only one side needs are summed out first. */
#include <ctype.h>
#include <string.h>

#include "../op_registry.h"
#include "paddlec/ops.h"

#define EIN_MAX_EQ 256
#define EIN_ELL 200 /* label codes of ellipsis dims: EIN_ELL + j */
#define EIN_NLAB 256

typedef struct ein_term {
  int n;                /* rank */
  int lab[PD_MAX_DIMS]; /* label code per dim */
} ein_term;

typedef struct ein_ctx {
  const char *eq;
  int64_t size[EIN_NLAB]; /* broadcast size per label */
} ein_ctx;

static void label_name(int code, char *buf) {
  if (code >= EIN_ELL)
    snprintf(buf, 16, "...[%d]", code - EIN_ELL);
  else
    snprintf(buf, 16, "%c", code);
}

static int term_find(const ein_term *t, int code) {
  for (int d = 0; d < t->n; d++)
    if (t->lab[d] == code) return d;
  return -1;
}

/* Parses one term (letters and at most one "...") into label codes and
 * whether it has an ellipsis; text is [s, e). */
static pd_status parse_term(const char *eq, const char *s, const char *e, int *codes, int *nlab, int *ell_at,
                            const char *what) {
  *nlab = 0;
  *ell_at = -1;
  for (const char *p = s; p < e;) {
    if (*p == '.') {
      if (e - p < 3 || p[1] != '.' || p[2] != '.')
        return pd_set_error(PD_ERR_INVALID,
                            "einsum: a '.' that is not part of '...' in %s '%.*s' of equation '%s'", what,
                            (int)(e - s), s, eq);
      if (*ell_at >= 0)
        return pd_set_error(PD_ERR_INVALID, "einsum: '...' appears twice in %s '%.*s' of equation '%s'", what,
                            (int)(e - s), s, eq);
      *ell_at = *nlab;
      p += 3;
      continue;
    }
    if (!isalpha((unsigned char)*p))
      return pd_set_error(PD_ERR_INVALID,
                          "einsum: invalid character '%c' in equation '%s' (labels are letters)", *p, eq);
    if (*nlab >= PD_MAX_DIMS)
      return pd_set_error(PD_ERR_INVALID, "einsum: %s '%.*s' of equation '%s' has more than %d labels", what,
                          (int)(e - s), s, eq, PD_MAX_DIMS);
    for (int k = 0; k < *nlab; k++)
      if (codes[k] == *p)
        return pd_set_error(PD_ERR_UNIMPLEMENTED,
                            "einsum: label '%c' repeats in %s '%.*s' of equation '%s' "
                            "(diagonals and traces are not supported)",
                            *p, what, (int)(e - s), s, eq);
    codes[(*nlab)++] = (unsigned char)*p;
    p++;
  }
  return PD_OK;
}

/* Sums out the dims of t whose labels are not in keep[]; updates the term. */
static pd_tensor *sum_out(pd_tensor *t, ein_term *term, const bool *keep) {
  int64_t axes[PD_MAX_DIMS];
  int na = 0;
  ein_term nt = {0};
  for (int d = 0; d < term->n; d++) {
    if (keep[term->lab[d]])
      nt.lab[nt.n++] = term->lab[d];
    else
      axes[na++] = d;
  }
  if (na == 0) return pd_tensor_retain(t);
  pd_tensor *r = pd_sum(t, axes, na, false);
  *term = nt;
  return r;
}

/* Permutes t to the label order `want` (a permutation of its labels). */
static pd_tensor *permute_to(pd_tensor *t, const ein_term *term, const int *want) {
  int64_t perm[PD_MAX_DIMS];
  bool ident = true;
  for (int d = 0; d < term->n; d++) {
    perm[d] = term_find(term, want[d]);
    ident &= perm[d] == d;
  }
  return ident ? pd_tensor_retain(t) : pd_transpose(t, term->n, perm);
}

/* Reshapes unless the shape is already the wanted one (keeps views as views). */
static pd_tensor *reshape_if(pd_tensor *t, int n, const int64_t *shape) {
  if (t->ndim == n && memcmp(t->shape, shape, sizeof(int64_t) * (size_t)n) == 0) return pd_tensor_retain(t);
  return pd_reshape(t, n, shape);
}

/* Orders of a, used to decide whether an arrangement is the operand's own. */
static bool is_identity_order(const ein_term *t, const int *order) {
  for (int d = 0; d < t->n; d++)
    if (t->lab[d] != order[d]) return false;
  return true;
}

/* One pairwise contraction; keep[] marks labels needed later. Releases
 * nothing it was given; returns a new tensor and its term in *out. */
static pd_tensor *contract(const char *eq, pd_tensor *a0, ein_term ta, pd_tensor *b0, ein_term tb,
                           const bool *keep, ein_term *out) {
  bool need_a[EIN_NLAB] = {0}, need_b[EIN_NLAB] = {0};
  for (int l = 0; l < EIN_NLAB; l++) need_a[l] = need_b[l] = keep[l];
  for (int d = 0; d < tb.n; d++) need_a[tb.lab[d]] = true;
  for (int d = 0; d < ta.n; d++) need_b[ta.lab[d]] = true;
  /* a shared, contracted label broadcast on one side (size 1) is summed on both */
  for (int d = 0; d < ta.n; d++) {
    int l = ta.lab[d], db = term_find(&tb, l);
    if (db >= 0 && !keep[l] && a0->shape[d] != b0->shape[db]) need_a[l] = need_b[l] = false;
  }
  pd_tensor *a = sum_out(a0, &ta, need_a), *b = sum_out(b0, &tb, need_b);
  pd_tensor *res = NULL, *ap = NULL, *bp = NULL, *ar = NULL, *br = NULL, *m = NULL;
  if (!a || !b) goto done;

  int batch[PD_MAX_DIMS], con[PD_MAX_DIMS], fa[PD_MAX_DIMS], fb[PD_MAX_DIMS];
  int nb = 0, nc = 0, nfa = 0, nfb = 0;
  for (int d = 0; d < ta.n; d++) {
    int l = ta.lab[d];
    if (term_find(&tb, l) >= 0) {
      if (keep[l])
        batch[nb++] = l;
      else
        con[nc++] = l;
    } else {
      fa[nfa++] = l;
    }
  }
  for (int d = 0; d < tb.n; d++)
    if (term_find(&ta, tb.lab[d]) < 0) fb[nfb++] = tb.lab[d];
  if (nb + nfa + nfb > PD_MAX_DIMS || nb + 2 > PD_MAX_DIMS) {
    pd_set_error(PD_ERR_UNIMPLEMENTED,
                 "einsum: equation '%s' needs an intermediate of %d dims (%d batch) for operands of shapes "
                 "%s and %s; at most %d dims (%d batch) are supported",
                 eq, nb + nfa + nfb, nb, PD_SHAPE_STR(a0), PD_SHAPE_STR(b0), PD_MAX_DIMS, PD_MAX_DIMS - 2);
    goto done;
  }

  /* A as [batch, free_A, con] (or [batch, con, free_A] with transpose_x) */
  int oa[PD_MAX_DIMS], ob[PD_MAX_DIMS], k = 0;
  bool tx = false, ty = false;
  for (int i = 0; i < nb; i++) oa[k++] = batch[i];
  for (int i = 0; i < nc; i++) oa[k++] = con[i];
  for (int i = 0; i < nfa; i++) oa[k++] = fa[i];
  if (nfa > 0 && nc > 0 && is_identity_order(&ta, oa)) {
    tx = true;
  } else {
    k = nb;
    for (int i = 0; i < nfa; i++) oa[k++] = fa[i];
    for (int i = 0; i < nc; i++) oa[k++] = con[i];
  }
  /* B as [batch, con, free_B] (or [batch, free_B, con] with transpose_y) */
  k = 0;
  for (int i = 0; i < nb; i++) ob[k++] = batch[i];
  for (int i = 0; i < nfb; i++) ob[k++] = fb[i];
  for (int i = 0; i < nc; i++) ob[k++] = con[i];
  if (nfb > 0 && nc > 0 && is_identity_order(&tb, ob)) {
    ty = true;
  } else {
    k = nb;
    for (int i = 0; i < nc; i++) ob[k++] = con[i];
    for (int i = 0; i < nfb; i++) ob[k++] = fb[i];
  }
  ap = permute_to(a, &ta, oa);
  bp = permute_to(b, &tb, ob);
  if (!ap || !bp) goto done;

  /* sizes from the operands themselves (a free dim may be a broadcast 1) */
  int64_t sa[PD_MAX_DIMS], sb[PD_MAX_DIMS], fa_size[PD_MAX_DIMS], fb_size[PD_MAX_DIMS], mA = 1, nB = 1,
                                                                                        kk = 1;
  for (int i = 0; i < nb; i++) {
    sa[i] = ap->shape[i];
    sb[i] = bp->shape[i];
  }
  for (int d = nb, i = 0; d < ap->ndim; d++) {
    if (term_find(&tb, oa[d]) >= 0) {
      kk *= ap->shape[d];
    } else {
      fa_size[i++] = ap->shape[d];
      mA *= ap->shape[d];
    }
  }
  for (int d = nb, i = 0; d < bp->ndim; d++) {
    if (term_find(&ta, ob[d]) < 0) {
      fb_size[i++] = bp->shape[d];
      nB *= bp->shape[d];
    }
  }
  sa[nb] = tx ? kk : mA;
  sa[nb + 1] = tx ? mA : kk;
  sb[nb] = ty ? nB : kk;
  sb[nb + 1] = ty ? kk : nB;
  ar = reshape_if(ap, nb + 2, sa);
  br = reshape_if(bp, nb + 2, sb);
  if (!ar || !br) goto done;
  m = pd_matmul(ar, br, tx, ty);
  if (!m) goto done;

  int64_t so[PD_MAX_DIMS];
  out->n = 0;
  for (int i = 0; i < nb; i++) {
    so[out->n] = m->shape[i];
    out->lab[out->n++] = batch[i];
  }
  for (int i = 0; i < nfa; i++) {
    so[out->n] = fa_size[i];
    out->lab[out->n++] = fa[i];
  }
  for (int i = 0; i < nfb; i++) {
    so[out->n] = fb_size[i];
    out->lab[out->n++] = fb[i];
  }
  res = reshape_if(m, out->n, so);
done:
  pd_tensor_release(a);
  pd_tensor_release(b);
  pd_tensor_release(ap);
  pd_tensor_release(bp);
  pd_tensor_release(ar);
  pd_tensor_release(br);
  pd_tensor_release(m);
  return res;
}

static pd_tensor *einsum_impl(const char *eq, int n, pd_tensor *const *ops) {
  char buf[EIN_MAX_EQ];
  size_t len = 0;
  for (const char *p = eq; *p; p++) {
    if (isspace((unsigned char)*p)) continue;
    if (len + 1 >= sizeof buf) {
      pd_set_error(PD_ERR_INVALID, "einsum: equation '%s' is too long (at most %d characters)", eq,
                   EIN_MAX_EQ - 1);
      return NULL;
    }
    buf[len++] = *p;
  }
  buf[len] = 0;
  const char *arrow = strstr(buf, "->");
  const char *lhs_end = arrow ? arrow : buf + len;
  if (arrow && strstr(arrow + 2, "->")) {
    pd_set_error(PD_ERR_INVALID, "einsum: '->' appears more than once in equation '%s'", eq);
    return NULL;
  }
  /* split the inputs */
  const char *ts[PD_MAX_OUTPUTS], *te[PD_MAX_OUTPUTS];
  int nt = 0;
  for (const char *s = buf;;) {
    const char *e = s;
    while (e < lhs_end && *e != ',') e++;
    if (nt < PD_MAX_OUTPUTS) {
      ts[nt] = s;
      te[nt] = e;
    }
    nt++;
    if (e >= lhs_end) break;
    s = e + 1;
  }
  if (nt != n) {
    pd_set_error(PD_ERR_INVALID, "einsum: equation '%s' has %d input term(s) but %d operand(s) were given",
                 eq, nt, n);
    return NULL;
  }
  ein_ctx c = {.eq = eq};
  ein_term terms[PD_MAX_OUTPUTS];
  int E = 0, count[EIN_NLAB] = {0};
  int owner[EIN_NLAB];
  for (int l = 0; l < EIN_NLAB; l++) owner[l] = -1;
  for (int i = 0; i < n; i++) {
    int codes[PD_MAX_DIMS], nlab, ell;
    if (parse_term(eq, ts[i], te[i], codes, &nlab, &ell, "input term") != PD_OK) return NULL;
    const pd_tensor *x = ops[i];
    int e = x->ndim - nlab;
    if ((ell < 0 && e != 0) || e < 0) {
      pd_set_error(PD_ERR_SHAPE,
                   "einsum: term '%.*s' of equation '%s' has %d label(s)%s but operand %d has shape %s",
                   (int)(te[i] - ts[i]), ts[i], eq, nlab, ell >= 0 ? " and '...'" : "", i, PD_SHAPE_STR(x));
      return NULL;
    }
    if (e > E) E = e;
    terms[i].n = x->ndim;
    int d = 0;
    for (int k = 0; k < nlab; k++) {
      if (k == ell)
        for (int j = 0; j < e; j++, d++) terms[i].lab[d] = -1 - j; /* fixed up below, once E is known */
      terms[i].lab[d++] = codes[k];
    }
    if (ell == nlab)
      for (int j = 0; j < e; j++, d++) terms[i].lab[d] = -1 - j;
  }
  for (int i = 0; i < n; i++) {
    int e = 0;
    for (int d = 0; d < terms[i].n; d++) e += terms[i].lab[d] < 0;
    for (int d = 0; d < terms[i].n; d++)
      if (terms[i].lab[d] < 0) terms[i].lab[d] = EIN_ELL + (E - e) + (-1 - terms[i].lab[d]);
    for (int d = 0; d < terms[i].n; d++) {
      int l = terms[i].lab[d];
      int64_t s = ops[i]->shape[d];
      count[l]++;
      if (owner[l] < 0) {
        owner[l] = i;
        c.size[l] = s;
        continue;
      }
      int64_t prev = c.size[l];
      if (s == prev) continue;
      if (l >= EIN_ELL && (s == 1 || prev == 1)) {
        if (s != 1) c.size[l] = s;
        continue;
      }
      char nm[16];
      label_name(l, nm);
      pd_set_error(PD_ERR_SHAPE,
                   "einsum: label '%s' of equation '%s' has size %lld in operand %d (shape %s) but %lld "
                   "in operand %d (shape %s)",
                   nm, eq, (long long)prev, owner[l], PD_SHAPE_STR(ops[owner[l]]), (long long)s, i,
                   PD_SHAPE_STR(ops[i]));
      return NULL;
    }
  }
  /* output labels */
  ein_term outt = {0};
  bool in_out[EIN_NLAB] = {0};
  if (arrow) {
    int codes[PD_MAX_DIMS], nlab, ell;
    if (parse_term(eq, arrow + 2, buf + len, codes, &nlab, &ell, "output") != PD_OK) return NULL;
    if (nlab + (ell >= 0 ? E : 0) > PD_MAX_DIMS) {
      pd_set_error(PD_ERR_INVALID, "einsum: output of equation '%s' has more than %d dims", eq, PD_MAX_DIMS);
      return NULL;
    }
    for (int k = 0; k <= nlab; k++) {
      if (k == ell)
        for (int j = 0; j < E; j++) outt.lab[outt.n++] = EIN_ELL + j;
      if (k == nlab) break;
      if (!count[codes[k]]) {
        pd_set_error(PD_ERR_INVALID,
                     "einsum: output label '%c' of equation '%s' does not appear in any input", codes[k], eq);
        return NULL;
      }
      outt.lab[outt.n++] = codes[k];
    }
  } else { /* implicit: broadcast dims, then labels seen once, in alphabetical order */
    for (int j = 0; j < E; j++) outt.lab[outt.n++] = EIN_ELL + j;
    for (int l = 0; l < EIN_ELL; l++)
      if (count[l] == 1) {
        if (outt.n >= PD_MAX_DIMS) {
          pd_set_error(PD_ERR_INVALID, "einsum: output of equation '%s' has more than %d dims", eq,
                       PD_MAX_DIMS);
          return NULL;
        }
        outt.lab[outt.n++] = l;
      }
  }
  for (int d = 0; d < outt.n; d++) in_out[outt.lab[d]] = true;

  /* contract left to right */
  pd_tensor *cur = pd_tensor_retain(ops[0]);
  ein_term ct = terms[0];
  for (int i = 1; i < n && cur; i++) {
    bool keep[EIN_NLAB];
    memcpy(keep, in_out, sizeof keep);
    for (int j = i + 1; j < n; j++)
      for (int d = 0; d < terms[j].n; d++) keep[terms[j].lab[d]] = true;
    ein_term nt2;
    pd_tensor *r = contract(eq, cur, ct, ops[i], terms[i], keep, &nt2);
    pd_tensor_release(cur);
    cur = r;
    ct = nt2;
  }
  if (!cur) return NULL;
  pd_tensor *s = sum_out(cur, &ct, in_out);
  pd_tensor_release(cur);
  if (!s) return NULL;
  int64_t perm[PD_MAX_DIMS];
  bool ident = s != ops[0];
  for (int d = 0; d < outt.n; d++) {
    perm[d] = term_find(&ct, outt.lab[d]);
    ident &= perm[d] == d;
  }
  pd_tensor *r = ident ? pd_tensor_retain(s) : pd_transpose(s, outt.n, perm);
  pd_tensor_release(s);
  return r;
}

pd_tensor *pd_einsum(const char *equation, int n, pd_tensor *const *operands) {
  if (!equation) {
    pd_set_error(PD_ERR_INVALID, "einsum: equation is NULL");
    return NULL;
  }
  if (n < 1 || n > PD_MAX_OUTPUTS || !operands) {
    pd_set_error(PD_ERR_INVALID, "einsum: equation '%s' needs 1 to %d operands, got %d", equation,
                 PD_MAX_OUTPUTS, operands ? n : 0);
    return NULL;
  }
  for (int i = 0; i < n; i++)
    if (!operands[i]) {
      if (pd_last_status() == PD_OK) pd_set_error(PD_ERR_INVALID, "einsum: operand %d is NULL", i);
      return NULL;
    }
  pd_internal_enter();
  pd_tensor *r = einsum_impl(equation, n, operands);
  pd_internal_leave();
  return pd_scope_track(r);
}
