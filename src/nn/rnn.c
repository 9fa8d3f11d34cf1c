/* paddle.nn recurrent layers: the SimpleRNN, LSTM and GRU cells, the RNN and
 * BiRNN wrappers and the multi-layer networks, built from public ops so
 * autograd runs through them.
 *
 * For the three built-in cells a sequence runs with one matmul for the input
 * projections of every time step (x W_ih^T over the whole sequence) and one
 * small matmul per step for the hidden projection. Forward functions run in
 * the scope pd_layer_call opens, so the temporaries below are released when
 * the call returns. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/shape_check.h"
#include "../core/tensor_impl.h" /* PD_SHAPE_STR */
#include "paddlec/creation.h"
#include "paddlec/linalg.h"
#include "paddlec/manipulation.h"
#include "paddlec/math.h"
#include "paddlec/rnn.h"

#define MAX_IO 64

enum cell_kind { CK_RNN_TANH, CK_RNN_RELU, CK_LSTM, CK_GRU };

typedef struct rnn_cell {
  pd_layer base;
  int kind;
  int64_t input_size, hidden_size;
  pd_tensor *w_ih, *w_hh, *b_ih, *b_hh; /* borrowed from the base's parameter list */
} rnn_cell;

static int cell_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out);
static char *cell_repr(const pd_layer *self);

static const pd_layer_type simple_cell_type = {"SimpleRNNCell", cell_forward, NULL, cell_repr};
static const pd_layer_type lstm_cell_type = {"LSTMCell", cell_forward, NULL, cell_repr};
static const pd_layer_type gru_cell_type = {"GRUCell", cell_forward, NULL, cell_repr};

static rnn_cell *as_cell(pd_layer *l) {
  if (l && (l->type == &simple_cell_type || l->type == &lstm_cell_type || l->type == &gru_cell_type))
    return (rnn_cell *)l;
  return NULL;
}

static int kind_states(int kind) { return kind == CK_LSTM ? 2 : 1; }
static int kind_gates(int kind) { return kind == CK_LSTM ? 4 : kind == CK_GRU ? 3 : 1; }

/* The status of the op that just failed. */
static pd_status fail(void) {
  pd_status s = pd_last_status();
  return s != PD_OK ? s : pd_set_error(PD_ERR_STATE, "rnn: an op failed without an error");
}

/* ---- the cell math ------------------------------------------------------------- */

/* x W_ih^T + bias for x [..., input]: one matmul over all leading dims.
 * The bias is b_ih + b_hh for SimpleRNN and LSTM (they only ever add), b_ih
 * alone for GRU (whose b_hc sits under the reset gate). */
static pd_tensor *input_projection(const rnn_cell *c, pd_tensor *x) {
  int nd = pd_tensor_ndim(x);
  const int64_t *xs = pd_tensor_shape(x);
  int64_t g = pd_tensor_shape(c->w_ih)[0];
  pd_tensor *flat = nd == 2 ? x : pd_reshape(x, 2, (int64_t[]){-1, c->input_size});
  pd_tensor *y = pd_matmul(flat, c->w_ih, false, true);
  pd_tensor *b = c->kind == CK_GRU ? c->b_ih : pd_add(c->b_ih, c->b_hh);
  y = pd_add(y, b);
  if (nd == 2 || !y) return y;
  int64_t shape[PD_MAX_DIMS];
  for (int d = 0; d < nd - 1; d++) shape[d] = xs[d];
  shape[nd - 1] = g;
  return pd_reshape(y, nd, shape);
}

/* One step: xg = this step's input projection [batch, gates * hidden];
 * st holds h (and c for LSTM) and receives the new states. */
static pd_status cell_step(const rnn_cell *c, pd_tensor *xg, pd_tensor **st) {
  pd_tensor *h = st[0];
  pd_tensor *hh = pd_matmul(h, c->w_hh, false, true);
  switch (c->kind) {
    case CK_RNN_TANH:
      st[0] = pd_tanh(pd_add(xg, hh));
      break;
    case CK_RNN_RELU:
      st[0] = pd_relu(pd_add(xg, hh));
      break;
    case CK_LSTM: {
      pd_tensor *g = pd_add(xg, hh), *p[4];
      if (!g) return fail();
      int n = pd_split(g, 4, NULL, -1, p, 4);
      if (n != 4) return n < 0 ? n : fail();
      pd_tensor *i = pd_sigmoid(p[0]), *f = pd_sigmoid(p[1]), *o = pd_sigmoid(p[3]);
      pd_tensor *cn = pd_add(pd_multiply(f, st[1]), pd_multiply(i, pd_tanh(p[2])));
      st[0] = pd_multiply(o, pd_tanh(cn));
      st[1] = cn;
      break;
    }
    default: { /* GRU */
      pd_tensor *xp[3], *hp[3];
      hh = pd_add(hh, c->b_hh);
      if (!hh) return fail();
      int n1 = pd_split(xg, 3, NULL, -1, xp, 3);
      if (n1 != 3) return n1 < 0 ? n1 : fail();
      int n2 = pd_split(hh, 3, NULL, -1, hp, 3);
      if (n2 != 3) return n2 < 0 ? n2 : fail();
      pd_tensor *r = pd_sigmoid(pd_add(xp[0], hp[0]));
      pd_tensor *z = pd_sigmoid(pd_add(xp[1], hp[1]));
      pd_tensor *cc = pd_tanh(pd_add(xp[2], pd_multiply(r, hp[2])));
      st[0] = pd_add(pd_multiply(pd_subtract(h, cc), z), cc);
      break;
    }
  }
  if (!st[0] || (c->kind == CK_LSTM && !st[1])) return fail();
  return PD_OK;
}

static pd_status check_dtype(const char *nm, const char *what, const pd_tensor *t, pd_dtype want) {
  if (pd_tensor_dtype(t) != want)
    return pd_set_error(PD_ERR_DTYPE, "%s: %s has dtype %s but the parameters are %s", nm, what,
                        pd_dtype_name(pd_tensor_dtype(t)), pd_dtype_name(want));
  return PD_OK;
}

/* Checks (or makes, when st[k] is NULL) the ns states of cell c, each [batch, hidden]. */
static pd_status cell_states(const char *nm, const rnn_cell *c, int64_t batch, pd_tensor **st) {
  pd_dtype dt = pd_tensor_dtype(c->w_ih);
  for (int k = 0; k < kind_states(c->kind); k++) {
    if (!st[k]) {
      st[k] = pd_zeros(2, (int64_t[]){batch, c->hidden_size}, dt);
      if (!st[k]) return fail();
      continue;
    }
    const int64_t *s = pd_tensor_shape(st[k]);
    if (pd_tensor_ndim(st[k]) != 2 || s[0] != batch || s[1] != c->hidden_size)
      return pd_set_error(PD_ERR_SHAPE,
                          "%s: state %d must have shape [%lld, %lld] ([batch, hidden_size]), got %s", nm, k,
                          (long long)batch, (long long)c->hidden_size, PD_SHAPE_STR(st[k]));
    pd_status e = check_dtype(nm, "a state", st[k], dt);
    if (e != PD_OK) return e;
  }
  return PD_OK;
}

static pd_status check_input(const char *nm, const rnn_cell *c, const pd_tensor *x, int want_ndim) {
  int nd = pd_tensor_ndim(x);
  if (nd != want_ndim)
    return pd_set_error(PD_ERR_SHAPE, "%s: inputs must be %d-D (%s), got shape %s", nm, want_ndim,
                        want_ndim == 2 ? "[batch, input_size]" : "[batch, time, input_size] or time major",
                        PD_SHAPE_STR(x));
  if (c && pd_tensor_shape(x)[nd - 1] != c->input_size)
    return pd_set_error(PD_ERR_SHAPE,
                        "%s: input_size mismatch: the layer's input_size is %lld but inputs have shape %s "
                        "(last dim %lld)",
                        nm, (long long)c->input_size, PD_SHAPE_STR(x), (long long)pd_tensor_shape(x)[nd - 1]);
  return c ? check_dtype(nm, "inputs", x, pd_tensor_dtype(c->w_ih)) : PD_OK;
}

/* cell(inputs[, states...]) -> (outputs, states...) */
static int cell_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  rnn_cell *c = (rnn_cell *)self;
  const char *nm = self->type->name;
  int ns = kind_states(c->kind);
  if (n_in != 1 && n_in != 1 + ns)
    return pd_set_error(PD_ERR_INVALID,
                        "%s: expects the inputs and %d state tensor%s (or none), got %d tensors", nm, ns,
                        ns > 1 ? "s" : "", n_in);
  if (max_out < 1 + ns)
    return pd_set_error(PD_ERR_INVALID, "%s: returns %d tensors, room for %d", nm, 1 + ns, max_out);
  pd_status e = check_input(nm, c, in[0], 2);
  if (e != PD_OK) return e;
  pd_tensor *st[2] = {n_in > 1 ? in[1] : NULL, n_in > 2 ? in[2] : NULL};
  if ((e = cell_states(nm, c, pd_tensor_shape(in[0])[0], st)) != PD_OK) return e;
  pd_tensor *xg = input_projection(c, in[0]);
  if (!xg) return fail();
  if ((e = cell_step(c, xg, st)) != PD_OK) return e;
  out[0] = st[0];
  for (int k = 0; k < ns; k++) out[1 + k] = st[k];
  return 1 + ns;
}

static char *cell_repr(const pd_layer *self) {
  const rnn_cell *c = (const rnn_cell *)self;
  char *s = malloc(96);
  if (s)
    snprintf(s, 96, "%lld, %lld%s", (long long)c->input_size, (long long)c->hidden_size,
             c->kind == CK_RNN_RELU ? ", activation=relu" : "");
  return s;
}

static pd_dtype param_dtype(const char *nm, pd_dtype dt) {
  if (dt == PD_BOOL) return pd_get_default_dtype();
  if (!pd_dtype_is_floating(dt)) {
    pd_set_error(PD_ERR_DTYPE, "%s: dtype must be floating, got %s", nm, pd_dtype_name(dt));
    return PD_BOOL;
  }
  return dt;
}

static int simple_kind(const char *nm, const char *activation) {
  if (!activation || !strcmp(activation, "tanh")) return CK_RNN_TANH;
  if (!strcmp(activation, "relu")) return CK_RNN_RELU;
  pd_set_error(PD_ERR_INVALID, "%s: activation should be tanh or relu, but got %s", nm, activation);
  return -1;
}

static pd_layer *cell_new(int kind, int64_t input_size, int64_t hidden_size, const pd_nn_rnn_cell_opts *o) {
  static const pd_nn_rnn_cell_opts defaults;
  if (!o) o = &defaults;
  const pd_layer_type *type = kind == CK_LSTM  ? &lstm_cell_type
                              : kind == CK_GRU ? &gru_cell_type
                                               : &simple_cell_type;
  const char *nm = type->name;
  if (hidden_size <= 0) {
    pd_set_error(PD_ERR_INVALID, "%s: hidden_size must be greater than 0, but now equals to %lld", nm,
                 (long long)hidden_size);
    return NULL;
  }
  if (input_size <= 0) {
    pd_set_error(PD_ERR_INVALID, "%s: input_size must be greater than 0, but now equals to %lld", nm,
                 (long long)input_size);
    return NULL;
  }
  if (o->proj_size != 0) {
    if (kind == CK_LSTM)
      pd_set_error(PD_ERR_UNIMPLEMENTED, "%s: proj_size=%lld is not supported (only 0, no projection)", nm,
                   (long long)o->proj_size);
    else
      pd_set_error(PD_ERR_INVALID, "%s: proj_size=%lld is only meaningful for LSTM", nm,
                   (long long)o->proj_size);
    return NULL;
  }
  pd_dtype dt = param_dtype(nm, o->dtype);
  if (dt == PD_BOOL) return NULL;
  int64_t g;
  if (pd_mul_overflow(kind_gates(kind), hidden_size, &g)) {
    pd_set_error(PD_ERR_INVALID, "%s: hidden_size %lld times %d gates overflows int64", nm,
                 (long long)hidden_size, kind_gates(kind));
    return NULL;
  }
  rnn_cell *c = pd_layer_new(sizeof *c, type);
  if (!c) return NULL;
  c->kind = kind;
  c->input_size = input_size;
  c->hidden_size = hidden_size;
  double std = 1.0 / sqrt((double)hidden_size);
  pd_initializer u = pd_nn_initializer_uniform(-std, std);
  c->w_ih = pd_layer_create_parameter(&c->base, "weight_ih", 2, (int64_t[]){g, input_size}, dt,
                                      o->weight_ih_attr, &u, false);
  if (c->w_ih)
    c->w_hh = pd_layer_create_parameter(&c->base, "weight_hh", 2, (int64_t[]){g, hidden_size}, dt,
                                        o->weight_hh_attr, &u, false);
  if (c->w_hh)
    c->b_ih =
        pd_layer_create_parameter(&c->base, "bias_ih", 1, (int64_t[]){g}, dt, o->bias_ih_attr, &u, true);
  if (c->b_ih)
    c->b_hh =
        pd_layer_create_parameter(&c->base, "bias_hh", 1, (int64_t[]){g}, dt, o->bias_hh_attr, &u, true);
  if (!c->b_hh) {
    pd_layer_release(&c->base);
    return NULL;
  }
  return &c->base;
}

pd_layer *pd_nn_simple_rnn_cell(int64_t input_size, int64_t hidden_size,
                                const pd_nn_simple_rnn_cell_opts *opts) {
  int kind = simple_kind("SimpleRNNCell", opts ? opts->activation : NULL);
  return kind < 0 ? NULL : cell_new(kind, input_size, hidden_size, opts);
}
pd_layer *pd_nn_lstm_cell(int64_t input_size, int64_t hidden_size, const pd_nn_lstm_cell_opts *opts) {
  return cell_new(CK_LSTM, input_size, hidden_size, opts);
}
pd_layer *pd_nn_gru_cell(int64_t input_size, int64_t hidden_size, const pd_nn_gru_cell_opts *opts) {
  return cell_new(CK_GRU, input_size, hidden_size, opts);
}

/* ---- running over a sequence ------------------------------------------------------ */

typedef struct seq_ctx {
  const char *nm;
  int time_axis; /* 1 for [batch, time, ...], 0 when time major */
  int64_t steps, batch;
  pd_tensor *mask, *keep_old; /* [time, batch, 1]: 1 where t < length, and 1 - mask; or NULL */
} seq_ctx;

/* x[..., t, ...] along axis, the axis removed (a view). */
static pd_tensor *take_step(pd_tensor *x, int axis, int64_t t) {
  int64_t ax = axis;
  pd_tensor *s = pd_slice(x, 1, &ax, (int64_t[]){t}, (int64_t[]){t + 1});
  return pd_squeeze(s, 1, &ax);
}

/* Splits off a trailing sequence_length (an integer tensor) from the inputs. */
static pd_tensor *take_sequence_length(pd_tensor *const *in, int *n_in) {
  if (*n_in > 1 && pd_dtype_is_integer(pd_tensor_dtype(in[*n_in - 1]))) return in[--*n_in];
  return NULL;
}

static pd_status seq_setup(seq_ctx *s, const char *nm, pd_tensor *x, bool time_major, pd_tensor *seq_len) {
  *s = (seq_ctx){.nm = nm, .time_axis = time_major ? 0 : 1};
  if (pd_tensor_ndim(x) != 3)
    return pd_set_error(PD_ERR_SHAPE, "%s: inputs must be 3-D (%s), got shape %s", nm,
                        time_major ? "[time_steps, batch, input_size]" : "[batch, time_steps, input_size]",
                        PD_SHAPE_STR(x));
  if (!pd_dtype_is_floating(pd_tensor_dtype(x)))
    return pd_set_error(PD_ERR_DTYPE, "%s: inputs must be floating, got %s", nm,
                        pd_dtype_name(pd_tensor_dtype(x)));
  const int64_t *xs = pd_tensor_shape(x);
  s->steps = xs[s->time_axis];
  s->batch = xs[1 - s->time_axis];
  if (s->steps == 0)
    return pd_set_error(PD_ERR_SHAPE, "%s: inputs have no time steps (shape %s)", nm, PD_SHAPE_STR(x));
  if (!seq_len) return PD_OK;
  pd_dtype ld = pd_tensor_dtype(seq_len);
  if (ld != PD_INT32 && ld != PD_INT64)
    return pd_set_error(PD_ERR_DTYPE, "%s: sequence_length must be int32 or int64, got %s", nm,
                        pd_dtype_name(ld));
  if (pd_tensor_ndim(seq_len) != 1 || pd_tensor_shape(seq_len)[0] != s->batch)
    return pd_set_error(PD_ERR_SHAPE, "%s: sequence_length must have shape [%lld] ([batch]), got %s", nm,
                        (long long)s->batch, PD_SHAPE_STR(seq_len));
  pd_tensor *t = pd_reshape(pd_arange(0, (double)s->steps, 1, ld), 3, (int64_t[]){s->steps, 1, 1});
  pd_tensor *len = pd_reshape(seq_len, 3, (int64_t[]){1, s->batch, 1});
  s->mask = pd_cast(pd_less_than(t, len), pd_tensor_dtype(x));
  s->keep_old = pd_scale(s->mask, -1.0, 1.0, true);
  return s->keep_old ? PD_OK : fail();
}

/* Runs one direction of `cell` over x. st (*ns entries, NULL = default) holds
 * the initial states and receives the final ones; *y the outputs stacked on
 * the time axis. For cells other than the built-in ones *ns may be 0 on entry
 * (states left to the cell) and is set from what the cell returns. */
static pd_status run_direction(const seq_ctx *s, pd_layer *cell, pd_tensor *x, bool reverse, pd_tensor **st,
                               int *ns, pd_tensor **y) {
  rnn_cell *c = as_cell(cell);
  pd_status e = PD_OK;
  pd_tensor *xg = NULL;
  if (c) {
    if ((e = check_input(s->nm, c, x, 3)) != PD_OK) return e;
    if ((e = cell_states(s->nm, c, s->batch, st)) != PD_OK) return e;
    if (!(xg = input_projection(c, x))) return fail();
  }
  pd_tensor **ys = malloc((size_t)s->steps * sizeof *ys);
  if (!ys) return pd_set_error(PD_ERR_MEMORY, "%s: out of memory", s->nm);
  for (int64_t k = 0; k < s->steps && e == PD_OK; k++) {
    int64_t t = reverse ? s->steps - 1 - k : k;
    pd_tensor *old[MAX_IO], *cur[MAX_IO];
    int n = *ns;
    for (int j = 0; j < n; j++) old[j] = cur[j] = st[j];
    pd_tensor *out;
    if (c) {
      pd_tensor *xt = take_step(xg, s->time_axis, t);
      if (!xt) {
        e = fail();
        break;
      }
      if ((e = cell_step(c, xt, cur)) != PD_OK) break;
      out = cur[0];
    } else {
      pd_tensor *args[MAX_IO], *res[MAX_IO];
      args[0] = take_step(x, s->time_axis, t);
      for (int j = 0; j < n; j++) args[1 + j] = cur[j];
      int r = pd_layer_call(cell, args, 1 + n, res, MAX_IO);
      if (r < 1) {
        e = r < 0 ? r : pd_set_error(PD_ERR_INVALID, "%s: the cell returned no outputs", s->nm);
        break;
      }
      if (n == 0 && k == 0) { /* the cell made its own initial states */
        n = *ns = r - 1;
        for (int j = 0; j < n; j++)
          old[j] = s->mask ? pd_zeros_like(res[1 + j], pd_tensor_dtype(res[1 + j])) : NULL;
      } else if (r - 1 != n) {
        e = pd_set_error(PD_ERR_INVALID, "%s: the cell returned %d states, expected %d", s->nm, r - 1, n);
        break;
      }
      out = res[0];
      for (int j = 0; j < n; j++) cur[j] = res[1 + j];
    }
    if (s->mask) { /* padded steps keep the previous state and give zero outputs */
      pd_tensor *m = take_step(s->mask, 0, t), *keep = take_step(s->keep_old, 0, t);
      for (int j = 0; j < n; j++) cur[j] = pd_add(pd_multiply(cur[j], m), pd_multiply(old[j], keep));
      out = pd_multiply(out, m);
    }
    for (int j = 0; j < n && e == PD_OK; j++)
      if (!(st[j] = cur[j])) e = fail();
    if (e == PD_OK && !(ys[t] = out)) e = fail();
  }
  if (e == PD_OK && !(*y = pd_stack(ys, (int)s->steps, s->time_axis))) e = fail();
  free(ys);
  return e;
}

/* ---- RNN and BiRNN ------------------------------------------------------------------ */

typedef struct rnn_wrap {
  pd_layer base;
  pd_layer *cell, *cell_bw; /* borrowed from the sublayer list; cell_bw only for BiRNN */
  bool is_reverse, time_major;
} rnn_wrap;

static int wrap_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out);
static const pd_layer_type rnn_type = {"RNN", wrap_forward, NULL, NULL};
static const pd_layer_type birnn_type = {"BiRNN", wrap_forward, NULL, NULL};

/* Runs a wrapper on x: st_in has nd * ns initial states (entries may be
 * NULL), st_out receives nd * ns final states, *y the outputs. *ns may be 0
 * for custom cells (see run_direction). */
static pd_status wrap_run(const seq_ctx *s, rnn_wrap *w, pd_tensor *x, pd_tensor *const *st_in, int *ns,
                          pd_tensor **st_out, pd_tensor **y) {
  bool bi = w->base.type == &birnn_type;
  int n0 = *ns, nf = n0;
  for (int j = 0; j < n0; j++) st_out[j] = st_in[j];
  pd_status e = run_direction(s, w->cell, x, w->is_reverse, st_out, &nf, y);
  if (e != PD_OK || !bi) {
    *ns = nf;
    return e;
  }
  int nb = n0;
  pd_tensor *bw[MAX_IO], *yb = NULL;
  for (int j = 0; j < n0; j++) bw[j] = st_in[n0 + j];
  if ((e = run_direction(s, w->cell_bw, x, true, bw, &nb, &yb)) != PD_OK) return e;
  if (nb != nf)
    return pd_set_error(PD_ERR_INVALID, "%s: the forward cell has %d states but the backward cell %d", s->nm,
                        nf, nb);
  if (2 * nf > MAX_IO - 1) return pd_set_error(PD_ERR_INVALID, "%s: too many states (%d)", s->nm, nf);
  for (int j = 0; j < nf; j++) st_out[nf + j] = bw[j];
  *ns = nf;
  *y = pd_concat((pd_tensor *[]){*y, yb}, 2, -1);
  return *y ? PD_OK : fail();
}

static int wrap_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  rnn_wrap *w = (rnn_wrap *)self;
  const char *nm = self->type->name;
  int nd = self->type == &birnn_type ? 2 : 1;
  if (n_in < 1) return pd_set_error(PD_ERR_INVALID, "%s: expects the inputs, got no tensors", nm);
  pd_tensor *seq_len = take_sequence_length(in, &n_in);
  int given = n_in - 1;
  rnn_cell *c = as_cell(w->cell);
  int ns = c ? kind_states(c->kind) : given / nd;
  if (given % nd || (given && given != nd * ns))
    return pd_set_error(PD_ERR_INVALID, "%s: expects %d initial state tensors (or none), got %d", nm, nd * ns,
                        given);
  seq_ctx s;
  pd_status e = seq_setup(&s, nm, in[0], w->time_major, seq_len);
  if (e != PD_OK) return e;
  pd_tensor *st_in[MAX_IO] = {NULL}, *st_out[MAX_IO], *y = NULL;
  for (int j = 0; j < given; j++) st_in[j] = in[1 + j];
  if ((e = wrap_run(&s, w, in[0], st_in, &ns, st_out, &y)) != PD_OK) return e;
  if (max_out < 1 + nd * ns)
    return pd_set_error(PD_ERR_INVALID, "%s: returns %d tensors, room for %d", nm, 1 + nd * ns, max_out);
  out[0] = y;
  for (int j = 0; j < nd * ns; j++) out[1 + j] = st_out[j];
  return 1 + nd * ns;
}

static rnn_wrap *wrap_new(const pd_layer_type *type, pd_layer *cell, pd_layer *cell_bw, bool time_major) {
  rnn_wrap *w = pd_layer_new(sizeof *w, type);
  if (!w) {
    pd_layer_release(cell);
    pd_layer_release(cell_bw);
    return NULL;
  }
  w->time_major = time_major;
  if (cell_bw) {
    w->cell = pd_layer_add_sublayer(&w->base, "cell_fw", cell);
    w->cell_bw =
        w->cell ? pd_layer_add_sublayer(&w->base, "cell_bw", cell_bw) : (pd_layer_release(cell_bw), NULL);
    if (!w->cell_bw) w->cell = NULL;
  } else {
    w->cell = pd_layer_add_sublayer(&w->base, "cell", cell);
  }
  if (!w->cell) {
    pd_layer_release(&w->base);
    return NULL;
  }
  return w;
}

pd_layer *pd_nn_rnn(pd_layer *cell, bool is_reverse, bool time_major) {
  if (!cell) {
    if (pd_last_status() == PD_OK) pd_set_error(PD_ERR_INVALID, "RNN: cell is NULL");
    return NULL;
  }
  rnn_wrap *w = wrap_new(&rnn_type, cell, NULL, time_major);
  if (w) w->is_reverse = is_reverse;
  return w ? &w->base : NULL;
}

pd_layer *pd_nn_bi_rnn(pd_layer *cell_fw, pd_layer *cell_bw, bool time_major) {
  if (!cell_fw || !cell_bw) {
    pd_layer_release(cell_fw);
    pd_layer_release(cell_bw);
    if (pd_last_status() == PD_OK)
      pd_set_error(PD_ERR_INVALID, "BiRNN: cell_%s is NULL", cell_fw ? "bw" : "fw");
    return NULL;
  }
  rnn_cell *f = as_cell(cell_fw), *b = as_cell(cell_bw);
  if (f && b && f->input_size != b->input_size) {
    pd_set_error(PD_ERR_INVALID,
                 "BiRNN: input size of forward cell (%lld) does not equal that of backward cell (%lld)",
                 (long long)f->input_size, (long long)b->input_size);
    pd_layer_release(cell_fw);
    pd_layer_release(cell_bw);
    return NULL;
  }
  rnn_wrap *w = wrap_new(&birnn_type, cell_fw, cell_bw, time_major);
  return w ? &w->base : NULL;
}

/* ---- SimpleRNN, LSTM, GRU --------------------------------------------------------- */

typedef struct rnn_net {
  pd_layer base;
  int kind, num_layers, num_dirs;
  int64_t input_size, hidden_size;
  bool time_major;
  double dropout;
  rnn_wrap **layers; /* borrowed from the sublayer list */
} rnn_net;

static int net_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out);
static void net_destroy(pd_layer *self) { free(((rnn_net *)self)->layers); }
static char *net_repr(const pd_layer *self);
static const pd_layer_type simple_net_type = {"SimpleRNN", net_forward, net_destroy, net_repr};
static const pd_layer_type lstm_net_type = {"LSTM", net_forward, net_destroy, net_repr};
static const pd_layer_type gru_net_type = {"GRU", net_forward, net_destroy, net_repr};

/* F.dropout(x, p, mode="upscale_in_train") */
static pd_tensor *dropout_upscale(pd_tensor *x, double p) {
  if (p >= 1.0) return pd_scale(x, 0.0, 0.0, true);
  pd_tensor *keep = pd_bernoulli(pd_full_like(x, 1.0 - p, pd_tensor_dtype(x)));
  return pd_multiply(x, pd_scale(keep, 1.0 / (1.0 - p), 0.0, true));
}

static int net_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  rnn_net *net = (rnn_net *)self;
  const char *nm = self->type->name;
  int ns = kind_states(net->kind), nd = net->num_dirs, nl = net->num_layers;
  if (n_in < 1) return pd_set_error(PD_ERR_INVALID, "%s: expects the inputs, got no tensors", nm);
  pd_tensor *seq_len = take_sequence_length(in, &n_in);
  if (n_in != 1 && n_in != 1 + ns)
    return pd_set_error(PD_ERR_INVALID, "%s: expects %d initial state tensor%s (or none), got %d", nm, ns,
                        ns > 1 ? "s (h, c)" : "", n_in - 1);
  if (max_out < 1 + ns)
    return pd_set_error(PD_ERR_INVALID, "%s: returns %d tensors, room for %d", nm, 1 + ns, max_out);
  seq_ctx s;
  pd_status e = seq_setup(&s, nm, in[0], net->time_major, seq_len);
  if (e != PD_OK) return e;
  pd_tensor *x = in[0];
  if ((e = check_input(nm, as_cell(net->layers[0]->cell), x, 3)) != PD_OK) return e;
  for (int k = 1; k < n_in; k++) {
    const int64_t *sh = pd_tensor_shape(in[k]);
    if (pd_tensor_ndim(in[k]) != 3 || sh[0] != (int64_t)nl * nd || sh[1] != s.batch ||
        sh[2] != net->hidden_size)
      return pd_set_error(
          PD_ERR_SHAPE,
          "%s: initial state %d must have shape [%d, %lld, %lld] ([num_layers * num_directions, "
          "batch, hidden_size]), got %s",
          nm, k - 1, nl * nd, (long long)s.batch, (long long)net->hidden_size, PD_SHAPE_STR(in[k]));
    if ((e = check_dtype(nm, "an initial state", in[k], pd_tensor_dtype(x))) != PD_OK) return e;
  }
  pd_tensor **fin = malloc((size_t)nl * nd * ns * sizeof *fin);
  if (!fin) return pd_set_error(PD_ERR_MEMORY, "%s: out of memory", nm);
  for (int l = 0; l < nl && e == PD_OK; l++) {
    if (l > 0 && self->training && net->dropout > 0 && !(x = dropout_upscale(x, net->dropout))) {
      e = fail();
      break;
    }
    pd_tensor *st_in[4] = {NULL}, *st_out[4];
    for (int d = 0; d < nd && n_in > 1; d++)
      for (int j = 0; j < ns; j++) st_in[d * ns + j] = take_step(in[1 + j], 0, (int64_t)l * nd + d);
    int n = ns;
    pd_tensor *y = NULL;
    if ((e = wrap_run(&s, net->layers[l], x, st_in, &n, st_out, &y)) != PD_OK) break;
    for (int d = 0; d < nd; d++)
      for (int j = 0; j < ns; j++) fin[(size_t)j * nl * nd + (size_t)l * nd + d] = st_out[d * ns + j];
    x = y;
  }
  if (e == PD_OK) {
    out[0] = x;
    for (int j = 0; j < ns && e == PD_OK; j++)
      if (!(out[1 + j] = pd_stack(fin + (size_t)j * nl * nd, nl * nd, 0))) e = fail();
  }
  free(fin);
  return e == PD_OK ? 1 + ns : e;
}

static char *net_repr(const pd_layer *self) {
  const rnn_net *n = (const rnn_net *)self;
  char *s = malloc(160);
  if (!s) return NULL;
  int k = snprintf(s, 160, "%lld, %lld", (long long)n->input_size, (long long)n->hidden_size);
  if (n->num_layers != 1) k += snprintf(s + k, 160 - (size_t)k, ", num_layers=%d", n->num_layers);
  if (n->time_major) k += snprintf(s + k, 160 - (size_t)k, ", time_major=True");
  if (n->dropout != 0) snprintf(s + k, 160 - (size_t)k, ", dropout=%g", n->dropout);
  return s;
}

static pd_status net_register(rnn_net *net, int layer, int dir, rnn_cell *c) {
  static const char *const base_names[4] = {"weight_ih", "weight_hh", "bias_ih", "bias_hh"};
  pd_tensor *ps[4] = {c->w_ih, c->w_hh, c->b_ih, c->b_hh};
  for (int i = 0; i < 4; i++) {
    char name[64];
    snprintf(name, sizeof name, "%s_l%d%s", base_names[i], layer, dir ? "_reverse" : "");
    pd_status e = pd_layer_add_parameter(&net->base, name, ps[i]);
    if (e != PD_OK) return e;
  }
  return PD_OK;
}

static pd_layer *net_new(int kind, const pd_layer_type *type, int64_t input_size, int64_t hidden_size,
                         const pd_nn_rnn_net_opts *o) {
  static const pd_nn_rnn_net_opts defaults;
  if (!o) o = &defaults;
  const char *nm = type->name;
  int nl = o->num_layers == 0 ? 1 : o->num_layers;
  if (nl < 0) {
    pd_set_error(PD_ERR_INVALID, "%s: num_layers must be positive, got %d", nm, o->num_layers);
    return NULL;
  }
  int nd;
  if (!o->direction || !strcmp(o->direction, "forward"))
    nd = 1;
  else if (!strcmp(o->direction, "bidirect") || !strcmp(o->direction, "bidirectional"))
    nd = 2;
  else {
    pd_set_error(PD_ERR_INVALID,
                 "%s: direction should be forward or bidirect (or bidirectional), received direction = %s",
                 nm, o->direction);
    return NULL;
  }
  if (!(o->dropout >= 0 && o->dropout <= 1)) {
    pd_set_error(PD_ERR_INVALID, "%s: dropout must be in [0, 1], got %g", nm, o->dropout);
    return NULL;
  }
  if (kind != CK_LSTM && o->proj_size != 0) {
    pd_set_error(PD_ERR_INVALID, "%s: proj_size=%lld is only meaningful for LSTM", nm,
                 (long long)o->proj_size);
    return NULL;
  }
  if (hidden_size <= 0) {
    pd_set_error(PD_ERR_INVALID, "%s: hidden_size must be greater than 0, but now equals to %lld", nm,
                 (long long)hidden_size);
    return NULL;
  }
  pd_nn_rnn_cell_opts co = {.weight_ih_attr = o->weight_ih_attr,
                            .weight_hh_attr = o->weight_hh_attr,
                            .bias_ih_attr = o->bias_ih_attr,
                            .bias_hh_attr = o->bias_hh_attr,
                            .proj_size = o->proj_size,
                            .dtype = o->dtype};
  rnn_net *net = pd_layer_new(sizeof *net, type);
  if (!net) return NULL;
  net->kind = kind;
  net->num_layers = nl;
  net->num_dirs = nd;
  net->input_size = input_size;
  net->hidden_size = hidden_size;
  net->time_major = o->time_major;
  net->dropout = o->dropout;
  net->layers = calloc((size_t)nl, sizeof *net->layers);
  pd_status e = net->layers ? PD_OK : pd_set_error(PD_ERR_MEMORY, "%s: out of memory", nm);
  for (int l = 0; l < nl && e == PD_OK; l++) {
    int64_t in_size = l == 0 ? input_size : nd * hidden_size;
    pd_layer *fw = cell_new(kind, in_size, hidden_size, &co);
    pd_layer *bw = nd == 2 && fw ? cell_new(kind, in_size, hidden_size, &co) : NULL;
    if (!fw || (nd == 2 && !bw)) {
      pd_layer_release(fw);
      e = fail();
      break;
    }
    rnn_wrap *w = wrap_new(nd == 2 ? &birnn_type : &rnn_type, fw, bw, o->time_major);
    char name[16];
    snprintf(name, sizeof name, "%d", l);
    if (!w || !pd_layer_add_sublayer(&net->base, name, &w->base)) {
      e = fail();
      break;
    }
    net->layers[l] = w;
    e = net_register(net, l, 0, (rnn_cell *)w->cell);
    if (e == PD_OK && nd == 2) e = net_register(net, l, 1, (rnn_cell *)w->cell_bw);
  }
  if (e != PD_OK) {
    pd_layer_release(&net->base);
    return NULL;
  }
  return &net->base;
}

pd_layer *pd_nn_simple_rnn(int64_t input_size, int64_t hidden_size, const pd_nn_simple_rnn_opts *opts) {
  int kind = simple_kind("SimpleRNN", opts ? opts->activation : NULL);
  return kind < 0 ? NULL : net_new(kind, &simple_net_type, input_size, hidden_size, opts);
}
pd_layer *pd_nn_lstm(int64_t input_size, int64_t hidden_size, const pd_nn_lstm_opts *opts) {
  return net_new(CK_LSTM, &lstm_net_type, input_size, hidden_size, opts);
}
pd_layer *pd_nn_gru(int64_t input_size, int64_t hidden_size, const pd_nn_gru_opts *opts) {
  return net_new(CK_GRU, &gru_net_type, input_size, hidden_size, opts);
}

int pd_nn_rnn_call(pd_layer *rnn, pd_tensor *inputs, pd_tensor *const *initial_states, int n_states,
                   pd_tensor *sequence_length, pd_tensor **outputs, pd_tensor **final_states,
                   int max_states) {
  if (!rnn || !inputs || !outputs || n_states < 0 || n_states > MAX_IO - 2 || (n_states && !initial_states) ||
      max_states < 0 || (max_states && !final_states) || max_states > MAX_IO - 1)
    return pd_last_status() != PD_OK && (!rnn || !inputs)
               ? pd_last_status()
               : pd_set_error(PD_ERR_INVALID, "rnn call: invalid arguments (%d initial states, room for %d)",
                              n_states, max_states);
  pd_tensor *args[MAX_IO], *res[MAX_IO];
  int na = 0;
  args[na++] = inputs;
  for (int j = 0; j < n_states; j++) args[na++] = initial_states[j];
  if (sequence_length) args[na++] = sequence_length;
  int n = pd_layer_call(rnn, args, na, res, 1 + max_states);
  if (n < 0) return n;
  *outputs = res[0];
  for (int j = 1; j < n; j++) final_states[j - 1] = res[j];
  return n - 1;
}
