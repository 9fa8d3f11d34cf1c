/* py_func: an op whose forward and backward are user C callbacks. Its
 * outputs' shapes and dtypes come from the specs given at registration (a
 * -1 dim takes the size of the same dim of the first input, the batch);
 * the kernel calls the forward and copies what it returns into the
 * outputs, checking each against its meta. The backward calls the user's
 * backward on (x..., out..., d out...) for the gradients of x; without one,
 * no gradient flows (as Paddle's py_func without backward_func). Both run
 * on values, so a static Program keeps its grad op (the rule is not
 * traced). */
#include <pthread.h>
#include <string.h>

#include "py_func.h"
#include "../op_registry.h"

#define MAX_PY_FUNCS 256
#define MAX_PY_OUT 16

typedef struct entry {
  pd_py_func_fn func, backward;
  void *user;
  int n_out;
  pd_meta out[MAX_PY_OUT];
} entry;

static entry g_funcs[MAX_PY_FUNCS];
static int g_n_funcs;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

int pd_py_func_register(pd_py_func_fn func, void *user, pd_py_func_fn backward,
                        const pd_input_spec *out_specs, int n_out) {
  if (!func) return pd_set_error(PD_ERR_INVALID, "py_func: func is NULL"), -1;
  if (n_out < 1 || n_out > MAX_PY_OUT || !out_specs)
    return pd_set_error(PD_ERR_INVALID, "py_func: %d outputs (expected 1 to %d specs)", n_out, MAX_PY_OUT),
           -1;
  entry e;
  memset(&e, 0, sizeof e); /* entries are compared bytewise, padding included */
  e.func = func;
  e.backward = backward;
  e.user = user;
  e.n_out = n_out;
  for (int k = 0; k < n_out; k++) {
    const pd_input_spec *s = &out_specs[k];
    if (s->ndim < 0 || s->ndim > PD_MAX_DIMS)
      return pd_set_error(PD_ERR_INVALID, "py_func: output %d has rank %d (0 to %d)", k, s->ndim,
                          PD_MAX_DIMS),
             -1;
    e.out[k].dtype = s->dtype ? s->dtype : PD_FLOAT32; /* as everywhere an InputSpec is read */
    if ((unsigned)e.out[k].dtype >= PD_NUM_DTYPES)
      return pd_set_error(PD_ERR_DTYPE, "py_func: output %d has an invalid dtype %d", k, (int)s->dtype), -1;
    e.out[k].ndim = s->ndim;
    for (int d = 0; d < s->ndim; d++) {
      if (s->shape[d] < -1)
        return pd_set_error(PD_ERR_SHAPE, "py_func: output %d dim %d is %lld (a size, or -1)", k, d,
                            (long long)s->shape[d]),
               -1;
      e.out[k].shape[d] = s->shape[d];
    }
  }
  pthread_mutex_lock(&g_lock);
  int id = -1;
  for (int i = 0; i < g_n_funcs && id < 0; i++)
    if (memcmp(&g_funcs[i], &e, sizeof e) == 0) id = i;
  if (id < 0 && g_n_funcs < MAX_PY_FUNCS) {
    id = g_n_funcs++;
    g_funcs[id] = e;
  }
  pthread_mutex_unlock(&g_lock);
  if (id < 0)
    pd_set_error(PD_ERR_STATE, "py_func: more than %d different functions registered", MAX_PY_FUNCS);
  return id;
}

static const entry *lookup(int64_t id) {
  pthread_mutex_lock(&g_lock);
  const entry *e = id >= 0 && id < g_n_funcs ? &g_funcs[id] : NULL;
  pthread_mutex_unlock(&g_lock);
  if (!e)
    pd_set_error(PD_ERR_INVALID,
                 "py_func: function %lld is not registered in this process (a Program holding py_func runs "
                 "only where its callbacks were given)",
                 (long long)id);
  return e;
}

static pd_status py_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                         pd_meta *out, int *n_out) {
  const entry *e = lookup(a->i[0]);
  if (!e) return pd_last_status();
  for (int k = 0; k < e->n_out; k++) {
    out[k] = e->out[k];
    for (int d = 0; d < out[k].ndim; d++) {
      if (out[k].shape[d] != -1) continue;
      if (n_in < 1 || d >= in[0]->ndim)
        return pd_set_error(PD_ERR_SHAPE,
                            "%s: output %d dim %d is -1, but the first input has no dim %d to take it from",
                            def->name, k, d, d);
      out[k].shape[d] = in[0]->shape[d];
    }
  }
  *n_out = e->n_out;
  return PD_OK;
}

/* Copies r (what the callback returned as output k) into o. */
static pd_status take(const char *op, const char *what, int k, pd_tensor *r, pd_tensor *o) {
  if (!r)
    return pd_last_status() != PD_OK ? pd_last_status()
                                     : pd_set_error(PD_ERR_INVALID, "%s: %s %d is NULL", op, what, k);
  if (r->dtype != o->dtype || r->ndim != o->ndim || !pd_shape_eq(o->ndim, r->shape, o->shape)) {
    char a[160];
    return pd_set_error(PD_ERR_SHAPE, "%s: %s %d is %s %s, expected %s %s", op, what, k,
                        pd_dtype_name(r->dtype), PD_SHAPE_STR(r), pd_dtype_name(o->dtype),
                        pd_shape_str(o->ndim, o->shape, a, sizeof a));
  }
  pd_tensor *c = pd_kernel_contiguous(r);
  if (!c) return pd_last_status();
  if (o->numel > 0) memcpy(pd_tensor_data(o), pd_tensor_data(c), (size_t)o->numel * pd_dtype_size(o->dtype));
  pd_tensor_release(c);
  return PD_OK;
}

static pd_status py_kernel(const pd_kernel_ctx *ctx) {
  const entry *e = lookup(ctx->attrs->i[0]);
  if (!e) return pd_last_status();
  pd_tensor *res[MAX_PY_OUT] = {0};
  bool g = pd_grad_mode_set(false);
  pd_status st = e->func(e->user, ctx->in, ctx->n_in, res, ctx->n_out);
  pd_grad_mode_set(g);
  if (st != PD_OK && pd_last_status() == PD_OK)
    st = pd_set_error(PD_ERR_INVALID, "%s: the forward function failed (status %d)", ctx->def->name, (int)st);
  for (int k = 0; st == PD_OK && k < ctx->n_out; k++)
    st = take(ctx->def->name, "output", k, res[k], ctx->out[k]);
  for (int k = 0; k < ctx->n_out; k++) pd_tensor_release(res[k]);
  return st;
}

static pd_status py_backward(const pd_backward_ctx *c) {
  const entry *e = lookup(c->attrs->i[0]);
  if (!e) return pd_last_status();
  if (!e->backward) return PD_OK; /* no gradient flows */
  pd_tensor *args[2 * PD_MAX_OUTPUTS];
  int n = 0;
  for (int i = 0; i < c->n_in; i++) args[n++] = c->inputs[i];
  for (int k = 0; k < c->n_out; k++) args[n++] = c->outputs[k];
  for (int k = 0; k < c->n_out; k++) args[n++] = c->grad_out[k];
  pd_tensor *g[PD_MAX_OUTPUTS] = {0};
  pd_status st = e->backward(e->user, args, n, g, c->n_in);
  if (st != PD_OK && pd_last_status() == PD_OK)
    st = pd_set_error(PD_ERR_INVALID, "py_func: the backward function failed (status %d)", (int)st);
  for (int i = 0; st == PD_OK && i < c->n_in; i++) {
    if (!g[i] || !c->needs_grad[i]) continue;
    const pd_meta *m = &c->in_meta[i];
    if (g[i]->dtype != m->dtype || g[i]->ndim != m->ndim || !pd_shape_eq(m->ndim, g[i]->shape, m->shape)) {
      char a[160];
      st = pd_set_error(PD_ERR_SHAPE, "py_func: the gradient of input %d is %s %s, expected %s %s", i,
                        pd_dtype_name(g[i]->dtype), PD_SHAPE_STR(g[i]), pd_dtype_name(m->dtype),
                        pd_shape_str(m->ndim, m->shape, a, sizeof a));
    }
  }
  for (int i = 0; i < c->n_in; i++) {
    if (st == PD_OK && c->needs_grad[i]) {
      c->grad_in[i] = g[i];
    } else {
      pd_tensor_release(g[i]);
    }
  }
  return st;
}

const pd_op_def pd_opdef_py_func = {
    .name = "py_func",
    .n_in = -1,
    .n_out = -1,
    .flags = PD_OPF_DIFF | PD_OPF_SAVE_IN | PD_OPF_SAVE_OUT | PD_OPF_BACKWARD_READS_VALUES,
    .attr_names = "i0:func_id",
    .infer_meta = py_meta,
    .kernel = {[PD_PLACE_CPU] = py_kernel},
    .backward = py_backward};
