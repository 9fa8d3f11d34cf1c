/* The grad ops of the control-flow and tensor array ops. A grad op
 * differentiates its forward on the eager tape: it makes leaves standing
 * for the forward's inputs, runs the forward on them with the tape on and
 * asks the tape for the gradients of the leaves. Only the branch taken
 * runs, forward and backward; an array's gradient is an array of its
 * elements' gradients.
 *
 * A while or conditional_block whose grad op runs later in the same run
 * keeps its taped run instead (pd_ctl_run_kept): it runs once, with the
 * tape on, and its grad ops differentiate that run without running the
 * loop or the branch again (all but the last retaining the graph). The
 * tape holds what the grad rules of the ops that ran read (their saved
 * inputs or outputs), per iteration for a while, as Paddle's while op
 * keeps a scope per step for while_grad to walk in reverse and its
 * conditional_block keeps the branch's scope; a temporary no rule reads is
 * freed as soon as nothing else holds it. */
#include <stdlib.h>
#include <string.h>

#include "../core/tensor_impl.h"
#include "control_grad.h"
#include "control_internal.h"
#include "paddlec/autograd.h"
#include "paddlec/creation.h"
#include "paddlec/math.h"

/* What a grad op differentiates: the tensors it made leaves of (an input,
 * or an element of an input array) with their gradients, and the outputs
 * (an output, or an element of an output array) with theirs. Arrays make
 * the counts unbounded (one element per loop step). */
typedef struct grad_set {
  pd_tensor **xs, **gx, **direct; /* per leaf: borrowed, owned, owned */
  int *of, *elem;                 /* per leaf: input slot, element (-1: the input itself) */
  int n, cap;
  pd_tensor **ys, **gys; /* borrowed */
  int ny, ycap;
} grad_set;

static bool grow(void **p, size_t size, int cap) {
  void *q = realloc(*p, size * (size_t)cap);
  if (q) *p = q;
  return q != NULL;
}

static pd_status add_leaf(grad_set *g, pd_tensor *x, int j, int k) {
  if (g->n == g->cap) {
    int c = g->cap ? 2 * g->cap : 16;
    if (!grow((void **)&g->xs, sizeof *g->xs, c) || !grow((void **)&g->gx, sizeof *g->gx, c) ||
        !grow((void **)&g->direct, sizeof *g->direct, c) || !grow((void **)&g->of, sizeof *g->of, c) ||
        !grow((void **)&g->elem, sizeof *g->elem, c))
      return pd_set_error(PD_ERR_MEMORY, "gradient: out of memory");
    g->cap = c;
  }
  g->xs[g->n] = x;
  g->gx[g->n] = g->direct[g->n] = NULL;
  g->of[g->n] = j;
  g->elem[g->n++] = k;
  return PD_OK;
}

static void grad_set_free(grad_set *g) {
  for (int x = 0; x < g->n; x++) {
    pd_tensor_release(g->gx[x]);
    pd_tensor_release(g->direct[x]);
  }
  free(g->xs), free(g->gx), free(g->direct), free(g->of), free(g->elem), free(g->ys), free(g->gys);
}

/* The leaf standing for input j: a detached copy that requires grad (an
 * array: a new array of such copies of its elements). */
static pd_tensor *make_leaf(pd_tensor *t, int j, bool want, grad_set *g) {
  bool arr = pd_array_is_value(t);
  if (!want || !pd_dtype_is_floating(t->dtype)) return pd_tensor_retain(t);
  if (!arr) {
    pd_tensor *x = pd_detach(t);
    if (x) pd_tensor_set_stop_gradient(x, false);
    if (x && add_leaf(g, x, j, -1) != PD_OK) {
      pd_tensor_release(x);
      return NULL;
    }
    return x;
  }
  int n = pd_array_value_len(t);
  pd_tensor *r = pd_array_value_new(t->dtype, NULL, 0);
  pd_status st = r ? PD_OK : pd_last_status();
  for (int k = 0; k < n && st == PD_OK; k++) { /* appended one by one: r holds each leaf */
    pd_tensor *e = pd_array_value_item(t, k), *x = e ? pd_detach(e) : NULL;
    if (e && !x) {
      st = pd_last_status();
      break;
    }
    if (x) pd_tensor_set_stop_gradient(x, false);
    st = pd_array_value_set(r, k, x);
    pd_tensor_release(x);
    if (st == PD_OK && x) st = add_leaf(g, x, j, k);
  }
  if (st != PD_OK) {
    pd_tensor_release(r);
    return NULL;
  }
  return r;
}

/* The gradient of input j: dense, or an array (holes where none flows). */
static pd_tensor *input_grad(const pd_tensor *t, int j, grad_set *g) {
  bool arr = pd_array_is_value(t);
  pd_tensor *r = arr ? pd_array_value_new(t->dtype, NULL, 0) : NULL;
  if (arr && !r) return NULL;
  if (arr && pd_array_value_len(t) > 0 && pd_array_value_set(r, pd_array_value_len(t) - 1, NULL) != PD_OK) {
    pd_tensor_release(r);
    return NULL;
  }
  for (int x = 0; x < g->n; x++) {
    if (g->of[x] != j) continue;
    pd_tensor *a = g->gx[x], *d = g->direct[x];
    pd_tensor *v = a && d ? pd_add(a, d) : a ? pd_detach(a) : d ? pd_tensor_retain(d) : NULL;
    if ((a || d) && !v) {
      pd_tensor_release(r);
      return NULL;
    }
    if (!arr) {
      pd_tensor_release(r);
      r = v;
      continue;
    }
    pd_status st = pd_array_value_set(r, g->elem[x], v);
    pd_tensor_release(v);
    if (st != PD_OK) {
      pd_tensor_release(r);
      return NULL;
    }
  }
  return r ? r : pd_zeros(t->ndim, t->shape, t->dtype);
}

/* Adds the pair (y, gy) to differentiate: gy straight into the input when y
 * is one of the leaves (an element an array op passed through). */
static pd_status add_target(grad_set *g, pd_tensor *y, pd_tensor *gy) {
  if (!y || !gy || y->stop_gradient || !pd_dtype_is_floating(y->dtype)) return PD_OK;
  for (int x = 0; x < g->n; x++)
    if (g->xs[x] == y) {
      pd_tensor *d = g->direct[x] ? pd_add(g->direct[x], gy) : pd_tensor_retain(gy);
      if (!d) return pd_last_status();
      pd_tensor_release(g->direct[x]);
      g->direct[x] = d;
      return PD_OK;
    }
  if (g->ny == g->ycap) {
    int c = g->ycap ? 2 * g->ycap : 16;
    if (!grow((void **)&g->ys, sizeof *g->ys, c) || !grow((void **)&g->gys, sizeof *g->gys, c))
      return pd_set_error(PD_ERR_MEMORY, "gradient: out of memory");
    g->ycap = c;
  }
  g->ys[g->ny] = y;
  g->gys[g->ny++] = gy;
  return PD_OK;
}

/* ---- a taped forward and its gradient ------------------------------------------- */
/* The leaves of a forward's inputs and the results of its run on them
 * with the tape on (none when no leaf wants a gradient). */
typedef struct taped {
  grad_set g;
  pd_tensor *leaf[2 * PD_MAX_OUTPUTS], *res[PD_MAX_OUTPUTS];
} taped;

static void taped_clear(taped *t) {
  for (int k = 0; k < 2 * PD_MAX_OUTPUTS; k++) pd_tensor_release(t->leaf[k]);
  for (int k = 0; k < PD_MAX_OUTPUTS; k++) pd_tensor_release(t->res[k]);
  grad_set_free(&t->g);
  memset(t, 0, sizeof *t);
}

/* Makes the leaves of forward op fwd's inputs in (those want asks a
 * gradient for) and, when there is one, runs fwd on them with the tape on. */
static pd_status tape_forward(const pd_program *p, pd_ctl_cache *c, const pd_operator *fwd,
                              pd_tensor *const *in, const bool *want, taped *t) {
  pd_status st = PD_OK;
  for (int j = 0; j < fwd->n_in && st == PD_OK; j++)
    if (!(t->leaf[j] = make_leaf(in[j], j, want[j], &t->g))) st = pd_last_status();
  if (st != PD_OK || t->g.n == 0) return st;
  bool prev = pd_set_grad_enabled(true);
  st = pd_ctl_forward(p, c, fwd, t->leaf, t->res);
  pd_set_grad_enabled(prev);
  return st;
}

/* Forgets what an earlier grad op took from t (its targets and the
 * gradients it found): the leaves and the taped run stay. */
static void grad_set_reset(grad_set *g) {
  for (int x = 0; x < g->n; x++) {
    pd_tensor_release(g->gx[x]);
    pd_tensor_release(g->direct[x]);
    g->gx[x] = g->direct[x] = NULL;
  }
  g->ny = 0;
}

/* The gradients of g's targets for the leaves of the inputs want asks
 * for (a run kept for several grad ops has leaves for the inputs any of
 * them asks for; the tape walks only to those this one asks for). */
static pd_status grad_of_wanted(grad_set *g, const bool *want, bool retain) {
  pd_grad_opts o = {.allow_unused = true, .retain_graph = retain};
  int m = 0;
  for (int x = 0; x < g->n; x++) m += want[g->of[x]];
  if (m == g->n) return pd_grad(g->ys, g->ny, g->xs, g->n, g->gys, &o, g->gx);
  if (m == 0) return PD_OK;
  pd_tensor **xs = malloc((size_t)m * sizeof *xs), **gx = calloc((size_t)m, sizeof *gx);
  pd_status st = xs && gx ? PD_OK : pd_set_error(PD_ERR_MEMORY, "gradient: out of memory");
  for (int x = 0, i = 0; x < g->n && st == PD_OK; x++)
    if (want[g->of[x]]) xs[i++] = g->xs[x];
  if (st == PD_OK) st = pd_grad(g->ys, g->ny, xs, m, g->gys, &o, gx);
  for (int x = 0, i = 0; x < g->n && st == PD_OK; x++)
    if (want[g->of[x]]) g->gx[x] = gx[i++];
  for (int i = 0; i < m && st != PD_OK && gx; i++)
    pd_tensor_release(gx[i]); /* pd_grad clears them; be sure */
  free(xs);
  free(gx);
  return st;
}

/* Grad op op of the forward taped in t: its inputs [forward inputs (fi),
 * forward outputs (fo), output gradients (fo)], one gradient per forward
 * input want asks for written to out. retain: the tape keeps what its
 * grad rules read, for another grad op of the same run. */
static pd_status grad_of_tape(const pd_operator *op, pd_tensor *const *in, const bool *want, bool retain,
                              pd_tensor **out, taped *t) {
  int fi = op->fwd_n_in, fo = op->fwd_n_out;
  grad_set *g = &t->g;
  pd_tensor *zeros[PD_MAX_OUTPUTS] = {0};
  pd_status st = PD_OK;
  grad_set_reset(g);
  bool prev = pd_set_grad_enabled(true);
  for (int i = 0; i < fo && st == PD_OK && g->n > 0; i++) {
    pd_tensor *gy = in[fi + fo + i], *r = t->res[i];
    if (pd_array_is_value(r)) { /* its gradient: an array too (absent: none flows) */
      for (int k = 0; gy && k < pd_array_value_len(r) && st == PD_OK; k++)
        st = add_target(g, pd_array_value_item(r, k), pd_array_value_item(gy, k));
      continue;
    }
    if (!gy && pd_dtype_is_floating(r->dtype) && !r->stop_gradient &&
        !(gy = zeros[i] = pd_zeros(r->ndim, r->shape, r->dtype)))
      st = pd_last_status();
    if (st == PD_OK) st = add_target(g, r, gy);
  }
  if (st == PD_OK && g->ny > 0) st = grad_of_wanted(g, want, retain);
  pd_set_grad_enabled(prev);
  for (int j = 0; j < fi && st == PD_OK; j++)
    if (want[j] && !(out[j] = input_grad(in[j], j, g))) st = pd_last_status();
  for (int k = 0; k < PD_MAX_OUTPUTS; k++) pd_tensor_release(zeros[k]);
  return st;
}

static pd_status check_grad_op(const pd_operator *op, pd_tensor *const *in) {
  int fi = op->fwd_n_in, fo = op->fwd_n_out;
  if (fi < 1 || fo < 1 || fi > 2 * PD_MAX_OUTPUTS || fo > PD_MAX_OUTPUTS || op->n_in != fi + 2 * fo ||
      op->n_out != fi)
    return pd_set_error(PD_ERR_INVALID, "%s: %d inputs, %d outputs for a forward op of %d and %d", op->type,
                        op->n_in, op->n_out, fi, fo);
  for (int j = 0; j < fi + fo; j++)
    if (!in[j]) return pd_set_error(PD_ERR_INVALID, "%s: input '%s' has no value", op->type, op->inputs[j]);
  return PD_OK;
}

static void drop_outputs(const pd_operator *op, pd_tensor **out) {
  for (int j = 0; j < op->fwd_n_in && j < 2 * PD_MAX_OUTPUTS; j++) {
    pd_tensor_release(out[j]);
    out[j] = NULL;
  }
}

pd_status pd_ctl_grad(const pd_program *p, pd_ctl_cache *c, const pd_operator *op, pd_tensor *const *in,
                      const bool *want, pd_tensor **out) {
  pd_status st = check_grad_op(op, in);
  if (st != PD_OK) return st;
  pd_operator fwd = *op; /* the forward op, as its grad op names it */
  fwd.type = (char *)pd_static_control_type(op->ctl);
  fwd.ctl_grad = false;
  fwd.n_in = op->fwd_n_in;
  fwd.n_out = op->fwd_n_out;
  fwd.outputs = op->inputs + op->fwd_n_in;
  taped t = {0};
  st = tape_forward(p, c, &fwd, in, want, &t);
  if (st == PD_OK) st = grad_of_tape(op, in, want, false, out, &t);
  taped_clear(&t);
  if (st != PD_OK) drop_outputs(op, out);
  return st;
}

/* ---- a while or conditional_block keeping its taped run --------------------------- */
bool pd_ctl_keeps_taped_run(pd_ctl_kind k) { return k == PD_CTL_WHILE || k == PD_CTL_COND; }

/* A tensor the taped run shares with the executor (an input, a result or
 * an element of either, held) and the version of its memory when the run
 * ended. */
typedef struct shared_mark {
  pd_tensor *t;
  uint32_t version;
} shared_mark;

struct pd_ctl_kept {
  taped t;
  pd_tensor *in[2 * PD_MAX_OUTPUTS]; /* the inputs it ran from */
  int n_in;
  shared_mark *marks; /* the inputs', then the results' tensors, in order */
  int n_marks, cap_marks;
};

void pd_ctl_kept_free(pd_ctl_kept *k) {
  if (!k) return;
  taped_clear(&k->t);
  for (int j = 0; j < k->n_in; j++) pd_tensor_release(k->in[j]);
  for (int m = 0; m < k->n_marks; m++) pd_tensor_release(k->marks[m].t);
  free(k->marks);
  free(k);
}

/* Notes t's memory version in k (check_at NULL; t held, so no other
 * tensor takes its address), or compares it with the note at *check_at
 * and moves on; false when out of memory or it differs. */
static bool mark_one(pd_ctl_kept *k, pd_tensor *t, int *check_at) {
  uint32_t v = pd_tensor_version(t);
  if (check_at) {
    if (*check_at >= k->n_marks || k->marks[*check_at].t != t || k->marks[*check_at].version != v)
      return false;
    ++*check_at;
    return true;
  }
  if (k->n_marks == k->cap_marks) {
    int c = k->cap_marks ? 2 * k->cap_marks : 8;
    if (!grow((void **)&k->marks, sizeof *k->marks, c)) return false;
    k->cap_marks = c;
  }
  k->marks[k->n_marks++] = (shared_mark){pd_tensor_retain(t), v};
  return true;
}

/* mark_one on t, or on each element of array t (holes skipped). */
static bool mark_value(pd_ctl_kept *k, const pd_tensor *t, int *check_at) {
  if (!pd_array_is_value(t)) return mark_one(k, (pd_tensor *)t, check_at);
  for (int e = 0; e < pd_array_value_len(t); e++) {
    pd_tensor *x = pd_array_value_item(t, e);
    if (x && !mark_one(k, x, check_at)) return false;
  }
  return true;
}

/* Notes (check_at NULL) or compares the memory versions of the tensors the
 * taped run shares with the executor: its leaves are views of the inputs
 * (or of their elements), the results the executor holds views of the
 * tape's, and a result array's elements may be what a grad rule saved (a
 * loop body's array_write stores the tensor it writes). */
static bool mark_shared(pd_ctl_kept *k, int n_out, int *check_at) {
  for (int j = 0; j < k->n_in; j++)
    if (!mark_value(k, k->in[j], check_at)) return false;
  for (int i = 0; i < n_out; i++)
    if (k->t.res[i] && !mark_value(k, k->t.res[i], check_at)) return false;
  return !check_at || *check_at == k->n_marks;
}

/* Whether no op wrote a tensor the taped run shares with the executor in
 * place, nor put another tensor in an input array, since it ran: else the
 * tape does not hold what the forward read and made. */
static bool shared_unchanged(pd_ctl_kept *k, int n_out) {
  int at = 0;
  return mark_shared(k, n_out, &at);
}

/* A result of the taped run as the executor holds it: the same values,
 * cut from the tape (an array: a new one of its elements so cut). */
static pd_tensor *untaped(pd_tensor *r) {
  if (!pd_array_is_value(r)) return pd_detach(r);
  int n = pd_array_value_len(r);
  pd_tensor *a = pd_array_value_new(r->dtype, NULL, 0);
  pd_status st = a ? PD_OK : pd_last_status();
  for (int k = n - 1; k >= 0 && st == PD_OK; k--) { /* the last first: the list grows once */
    pd_tensor *e = pd_array_value_item(r, k), *d = e ? pd_detach(e) : NULL;
    st = e && !d ? pd_last_status() : pd_array_value_set(a, k, d);
    pd_tensor_release(d);
  }
  if (st != PD_OK) {
    pd_tensor_release(a);
    return NULL;
  }
  return a;
}

static pd_status run_plain(const pd_program *p, pd_ctl_cache *c, const pd_operator *op, pd_tensor *const *in,
                           const bool *want, pd_tensor **out) {
  return c ? pd_ctl_run(c, op, in, want, out) : pd_static_run_control(p, op, in, want, out);
}

pd_status pd_ctl_run_kept(const pd_program *p, pd_ctl_cache *c, const pd_operator *op, pd_tensor *const *in,
                          const bool *want, const bool *grad_want, pd_tensor **out, pd_ctl_kept **kept) {
  *kept = NULL;
  if (!pd_ctl_keeps_taped_run(op->ctl) || op->ctl_grad || op->n_in > 2 * PD_MAX_OUTPUTS || op->n_out < 1 ||
      op->n_out > PD_MAX_OUTPUTS)
    return run_plain(p, c, op, in, want, out); /* nothing to keep; its errors as without a grad op */
  for (int j = 0; j < op->n_in; j++)
    if (!in[j]) return run_plain(p, c, op, in, want, out);
  pd_ctl_kept *k = calloc(1, sizeof *k);
  if (!k) return pd_set_error(PD_ERR_MEMORY, "%s: out of memory", op->type);
  pd_status st = tape_forward(p, c, op, in, grad_want, &k->t);
  if (st == PD_OK && k->t.g.n == 0) { /* no gradient wanted: it runs as without a grad op */
    pd_ctl_kept_free(k);
    return run_plain(p, c, op, in, want, out);
  }
  for (int i = 0; i < op->n_out && st == PD_OK; i++)
    if (want[i] && !(out[i] = untaped(k->t.res[i]))) st = pd_last_status();
  k->n_in = op->n_in;
  for (int j = 0; j < op->n_in; j++) k->in[j] = pd_tensor_retain(in[j]);
  if (st == PD_OK && !mark_shared(k, op->n_out, NULL))
    st = pd_set_error(PD_ERR_MEMORY, "%s: out of memory", op->type);
  if (st != PD_OK) {
    for (int i = 0; i < op->n_out; i++) {
      pd_tensor_release(out[i]);
      out[i] = NULL;
    }
    pd_ctl_kept_free(k);
    return st;
  }
  *kept = k;
  return PD_OK;
}

pd_status pd_ctl_grad_kept(const pd_program *p, pd_ctl_cache *c, pd_ctl_kept *k, const pd_operator *op,
                           pd_tensor *const *in, const bool *want, bool last, pd_tensor **out) {
  pd_status st = check_grad_op(op, in);
  if (st != PD_OK) return st;
  if (!op->ctl_grad || !pd_ctl_keeps_taped_run(op->ctl))
    return pd_set_error(PD_ERR_INVALID, "%s: no grad op of a while or conditional_block", op->type);
  bool same = k && k->n_in == op->fwd_n_in;
  for (int j = 0; same && j < k->n_in; j++) same = k->in[j] == in[j];
  /* the inputs are not those the forward ran from, or an op wrote them
   * (or the results) since: run it again on the inputs as they are */
  if (!same || !shared_unchanged(k, op->fwd_n_out)) return pd_ctl_grad(p, c, op, in, want, out);
  st = grad_of_tape(op, in, want, !last, out, &k->t);
  if (st != PD_OK) drop_outputs(op, out);
  return st;
}

pd_operator *pd_static_append_control_grad(pd_static_block *b, const pd_operator *op, const char *const *ins,
                                           const char *const *outs) {
  char type[96];
  snprintf(type, sizeof type, "%s_grad", op->type);
  pd_operator *g = pd_ir_append_op(b, type, ins, op->n_in + 2 * op->n_out, outs, op->n_in, &op->attrs);
  if (!g) return NULL;
  g->fwd_n_in = op->n_in;
  g->fwd_n_out = op->n_out;
  g->role = PD_OP_ROLE_BACKWARD;
  return g;
}
