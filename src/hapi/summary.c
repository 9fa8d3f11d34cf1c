/* paddle.summary: one forward pass with a post-hook on every sublayer, then
 * Paddle's table of input/output shapes and parameter counts, and its
 * memory estimate. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "../core/core_internal.h"
#include "../core/strbuf.h"
#include "paddlec/autograd.h"
#include "paddlec/summary.h"
#include "paddlec/creation.h"
#include "paddlec/math.h"

#define MAX_IO 64

typedef struct srow {
  char *key; /* "Linear-1" */
  char *in_str, *out_str;
  int64_t out_elems; /* sum over outputs of prod(shape) */
  int64_t nb_params, trainable_params;
} srow;

typedef struct sctx {
  srow *rows;
  int n, cap;
} sctx;

static void sctx_free(sctx *c) {
  for (int i = 0; i < c->n; i++) {
    free(c->rows[i].key);
    free(c->rows[i].in_str);
    free(c->rows[i].out_str);
  }
  free(c->rows);
}

/* The number at the end of full_name ("linear_0" -> 0), or -1. */
static long full_name_index(const char *full) {
  const char *u = full ? strrchr(full, '_') : NULL;
  if (!u || !u[1]) return -1;
  char *end;
  long v = strtol(u + 1, &end, 10);
  return *end || !isdigit((unsigned char)u[1]) ? -1 : v;
}

static int64_t shape_prod(const pd_tensor *t) {
  int64_t p = 1;
  for (int i = 0; i < pd_tensor_ndim(t); i++) p *= pd_tensor_shape(t)[i];
  return p;
}

static int summary_hook(pd_layer *l, pd_tensor *const *in, int n_in, pd_tensor **out, int n_out, void *user) {
  sctx *c = user;
  pd_strbuf key = {0}, ins = {0}, outs = {0};
  long idx = full_name_index(pd_layer_full_name(l));
  pd_sb_printf(&key, "%s-%ld", l->type->name ? l->type->name : "Layer", (idx >= 0 ? idx : c->n) + 1);
  pd_sb_puts(&ins, "[");
  for (int i = 0; i < n_in; i++) {
    if (i) pd_sb_puts(&ins, ", ");
    pd_sb_shape(&ins, pd_tensor_ndim(in[i]), pd_tensor_shape(in[i]));
  }
  pd_sb_puts(&ins, "]");
  int64_t elems = n_out == 0; /* no output: Python's np.prod([]) counts 1 */
  if (n_out == 1) {
    pd_sb_shape(&outs, pd_tensor_ndim(out[0]), pd_tensor_shape(out[0]));
    elems = shape_prod(out[0]);
  } else {
    pd_sb_puts(&outs, "[");
    for (int i = 0; i < n_out; i++) {
      if (i) pd_sb_puts(&outs, ", ");
      pd_sb_shape(&outs, pd_tensor_ndim(out[i]), pd_tensor_shape(out[i]));
      elems += shape_prod(out[i]);
    }
    pd_sb_puts(&outs, "]");
  }
  /* the layer's own parameters (layer._parameters): names without a dot */
  pd_named_tensors ps;
  pd_status st = pd_layer_named_parameters(l, &ps);
  int64_t nb = 0, tr = 0;
  for (int i = 0; st == PD_OK && i < ps.n; i++) {
    if (strchr(ps.names[i], '.')) continue;
    int64_t k = pd_tensor_numel(ps.tensors[i]);
    nb += k;
    const pd_param_info *pi = pd_tensor_param_info(ps.tensors[i]);
    if (pi && pi->trainable && !pd_tensor_stop_gradient(ps.tensors[i])) tr += k;
  }
  if (st == PD_OK) pd_named_tensors_free(&ps);
  if (st == PD_OK && (key.failed || ins.failed || outs.failed))
    st = pd_set_error(PD_ERR_MEMORY, "summary: out of memory");
  int r = 0;
  while (st == PD_OK && r < c->n && strcmp(c->rows[r].key, key.s) != 0) r++;
  if (st == PD_OK && r == c->n) {
    if (c->n == c->cap) {
      int cap = c->cap ? 2 * c->cap : 16;
      srow *rows = realloc(c->rows, (size_t)cap * sizeof *rows);
      if (!rows)
        st = pd_set_error(PD_ERR_MEMORY, "summary: out of memory");
      else {
        c->rows = rows;
        c->cap = cap;
      }
    }
    if (st == PD_OK) c->rows[c->n++] = (srow){key.s, NULL, NULL, 0, 0, 0};
    if (st == PD_OK) key.s = NULL;
  }
  if (st == PD_OK) {
    /* a layer called again keeps its place and shows its last call */
    srow *row = &c->rows[r];
    free(row->in_str);
    free(row->out_str);
    row->in_str = ins.s;
    row->out_str = outs.s;
    ins.s = outs.s = NULL;
    row->out_elems = elems;
    row->nb_params = nb;
    row->trainable_params = tr;
  }
  free(key.s);
  free(ins.s);
  free(outs.s);
  return st == PD_OK ? 0 : st;
}

/* Python's "{:^{w}}": the extra space of an odd padding goes right. */
static void center(pd_strbuf *b, const char *s, size_t w) {
  size_t n = strlen(s), pad = n < w ? w - n : 0;
  pd_sb_repeat(b, ' ', pad / 2);
  pd_sb_puts(b, s);
  pd_sb_repeat(b, ' ', pad - pad / 2);
}

/* "{:,}" */
static void with_commas(char *buf, size_t cap, int64_t v) {
  char digits[32];
  snprintf(digits, sizeof digits, "%lld", (long long)(v < 0 ? -v : v));
  size_t n = strlen(digits), k = 0;
  if (v < 0 && k + 1 < cap) buf[k++] = '-';
  for (size_t i = 0; i < n && k + 2 < cap; i++) {
    if (i && (n - i) % 3 == 0) buf[k++] = ',';
    buf[k++] = digits[i];
  }
  buf[k] = 0;
}

static size_t max_sz(size_t a, size_t b) { return a > b ? a : b; }

static char *render(const sctx *c, double input_mb, pd_summary_info *info) {
  size_t lw = 15, iw = 20, ow = 20, pw = 15, tw = 75;
  for (int i = 0; i < c->n; i++) {
    char num[32];
    snprintf(num, sizeof num, "%lld", (long long)c->rows[i].nb_params);
    ow = max_sz(ow, strlen(c->rows[i].out_str));
    iw = max_sz(iw, strlen(c->rows[i].in_str));
    lw = max_sz(lw, strlen(c->rows[i].key));
    pw = max_sz(pw, strlen(num));
  }
  tw = max_sz(tw, lw + iw + ow + pw + 5);
  pd_strbuf b = {0};
  pd_sb_repeat(&b, '-', tw);
  pd_sb_puts(&b, "\n");
  center(&b, "Layer (type)", lw);
  pd_sb_puts(&b, " ");
  center(&b, "Input Shape", iw);
  pd_sb_puts(&b, " ");
  center(&b, "Output Shape", ow);
  pd_sb_puts(&b, " ");
  center(&b, "Param #", pw);
  pd_sb_puts(&b, "\n");
  pd_sb_repeat(&b, '=', tw);
  pd_sb_puts(&b, "\n");
  int64_t total = 0, trainable = 0, total_output = 0;
  for (int i = 0; i < c->n; i++) {
    const srow *r = &c->rows[i];
    char num[40];
    with_commas(num, sizeof num, r->nb_params);
    center(&b, r->key, lw);
    pd_sb_puts(&b, " ");
    center(&b, r->in_str, iw);
    pd_sb_puts(&b, " ");
    center(&b, r->out_str, ow);
    pd_sb_puts(&b, " ");
    center(&b, num, pw);
    pd_sb_puts(&b, "\n");
    total += r->nb_params;
    trainable += r->trainable_params;
    total_output += r->out_elems;
  }
  double mb = 1024.0 * 1024.0;
  double out_mb = 2.0 * (double)total_output * 4.0 / mb, params_mb = (double)total * 4.0 / mb;
  double total_mb = params_mb + out_mb + input_mb;
  char a[40], t[40], nt[40];
  with_commas(a, sizeof a, total);
  with_commas(t, sizeof t, trainable);
  with_commas(nt, sizeof nt, total - trainable);
  pd_sb_repeat(&b, '=', tw);
  pd_sb_printf(&b, "\nTotal params: %s\nTrainable params: %s\nNon-trainable params: %s\n", a, t, nt);
  pd_sb_repeat(&b, '-', tw);
  pd_sb_printf(&b,
               "\nInput size (MB): %0.2f\nForward/backward pass size (MB): %0.2f\nParams size (MB): %0.2f\n"
               "Estimated Total Size (MB): %0.2f\n",
               input_mb, out_mb, params_mb, total_mb);
  pd_sb_repeat(&b, '-', tw);
  pd_sb_puts(&b, "\n");
  if (b.failed) {
    free(b.s);
    pd_set_error(PD_ERR_MEMORY, "summary: out of memory");
    return NULL;
  }
  if (info)
    *info = (pd_summary_info){total, trainable, total - trainable, input_mb, out_mb, params_mb, total_mb};
  return b.s;
}

typedef struct hooked {
  pd_layer *l;
  int id;
} hooked;

/* Runs net on `in` with the hooks installed, then renders the table. */
static char *run_summary(pd_layer *net, pd_tensor *const *in, int n_in, double input_mb,
                         pd_summary_info *info) {
  pd_named_layers subs;
  if (pd_layer_named_sublayers(net, &subs) != PD_OK) return NULL;
  hooked *hs = calloc((size_t)subs.n + 1, sizeof *hs);
  sctx c = {0};
  int nh = 0;
  pd_status st = hs ? PD_OK : pd_set_error(PD_ERR_MEMORY, "summary: out of memory");
  for (int i = -1; i < subs.n && st == PD_OK; i++) {
    pd_layer *l = i < 0 ? net : subs.layers[i];
    const char *tn = l->type->name ? l->type->name : "";
    if (strcmp(tn, "Sequential") == 0 || strcmp(tn, "LayerList") == 0) continue;
    if (l == net && subs.n > 0) continue;
    int id = pd_layer_register_forward_post_hook(l, summary_hook, &c);
    if (id < 0)
      st = (pd_status)id;
    else
      hs[nh++] = (hooked){l, id};
  }
  /* Paddle switches to eval only a net in training mode, and back after */
  bool was_training = net->training;
  if (was_training) pd_layer_eval(net);
  pd_no_grad_begin();
  if (st == PD_OK) {
    pd_tensor *out[MAX_IO];
    int n = pd_layer_call(net, in, n_in, out, MAX_IO);
    for (int k = 0; k < n; k++) pd_tensor_release(out[k]);
    if (n < 0) st = (pd_status)n;
  }
  pd_no_grad_end();
  if (was_training) pd_layer_train(net);
  for (int i = 0; i < nh; i++) pd_layer_remove_hook(hs[i].l, hs[i].id);
  char *text = st == PD_OK ? render(&c, input_mb, info) : NULL;
  sctx_free(&c);
  free(hs);
  pd_named_layers_free(&subs);
  return text;
}

static double input_mb_of(int ndim, const int64_t *shape) {
  double p = 1;
  for (int i = 0; i < ndim; i++) p *= (double)shape[i];
  return p * 4.0 / (1024.0 * 1024.0);
}

char *pd_summary_string(pd_layer *net, int n_inputs, const int *ndims, const int64_t *const *shapes,
                        const pd_dtype *dtypes, pd_summary_info *info) {
  if (!net || n_inputs <= 0 || n_inputs > MAX_IO || !ndims || !shapes) {
    pd_set_error(PD_ERR_INVALID, "summary: %s",
                 !net ? "net is NULL"
                 : n_inputs <= 0 || n_inputs > MAX_IO
                     ? "n_inputs must be in [1, 64] (input_size cannot be None)"
                     : "ndims or shapes is NULL");
    return NULL;
  }
  int64_t fixed[MAX_IO][PD_MAX_DIMS];
  double input_mb = 0;
  for (int i = 0; i < n_inputs; i++) {
    if (ndims[i] < 0 || ndims[i] > PD_MAX_DIMS || (ndims[i] > 0 && !shapes[i])) {
      pd_set_error(PD_ERR_INVALID, "summary: input %d has %d dims (must be 0..%d)", i, ndims[i], PD_MAX_DIMS);
      return NULL;
    }
    int unknown = 0;
    for (int d = 0; d < ndims[i]; d++) {
      int64_t v = shapes[i][d];
      if (v == -1) {
        if (++unknown > 1) {
          char sh[200];
          pd_set_error(PD_ERR_INVALID,
                       "summary: input %d shape %s: only the batch dim of input_size can be -1 (None)", i,
                       pd_shape_str(ndims[i], shapes[i], sh, sizeof sh));
          return NULL;
        }
        v = 1;
      } else if (v <= 0) {
        pd_set_error(PD_ERR_INVALID,
                     "summary: expected element in input size greater than zero, but got %lld "
                     "(input %d, dim %d)",
                     (long long)v, i, d);
        return NULL;
      }
      fixed[i][d] = v;
    }
    if (dtypes && (unsigned)dtypes[i] >= PD_NUM_DTYPES) {
      pd_set_error(PD_ERR_DTYPE, "summary: input %d has an invalid dtype %d", i, (int)dtypes[i]);
      return NULL;
    }
    input_mb += input_mb_of(ndims[i], fixed[i]);
  }
  pd_tensor *in[MAX_IO] = {0};
  char *text = NULL;
  pd_internal_enter();
  int ok = 1;
  for (int i = 0; i < n_inputs && ok; i++) {
    pd_dtype dt = dtypes ? dtypes[i] : PD_FLOAT32;
    pd_tensor *r = pd_rand(ndims[i], fixed[i], PD_FLOAT32);
    in[i] = r && dt != PD_FLOAT32 ? pd_cast(r, dt) : pd_tensor_retain(r);
    pd_tensor_release(r);
    ok = in[i] != NULL;
  }
  if (ok) text = run_summary(net, in, n_inputs, input_mb, info);
  for (int i = 0; i < n_inputs; i++) pd_tensor_release(in[i]);
  pd_internal_leave();
  return text;
}

char *pd_summary_string_inputs(pd_layer *net, pd_tensor *const *inputs, int n_inputs, pd_summary_info *info) {
  if (!net || !inputs || n_inputs <= 0 || n_inputs > MAX_IO) {
    pd_set_error(PD_ERR_INVALID, "summary: %s", !net ? "net is NULL" : "inputs must be 1..64 tensors");
    return NULL;
  }
  double input_mb = 0;
  for (int i = 0; i < n_inputs; i++) {
    if (!inputs[i]) {
      if (pd_last_status() == PD_OK) pd_set_error(PD_ERR_INVALID, "summary: input %d is NULL", i);
      return NULL;
    }
    input_mb += input_mb_of(pd_tensor_ndim(inputs[i]), pd_tensor_shape(inputs[i]));
  }
  pd_internal_enter();
  char *text = run_summary(net, inputs, n_inputs, input_mb, info);
  pd_internal_leave();
  return text;
}

pd_status pd_summary(pd_layer *net, int n_inputs, const int *ndims, const int64_t *const *shapes,
                     const pd_dtype *dtypes, pd_summary_info *info) {
  char *text = pd_summary_string(net, n_inputs, ndims, shapes, dtypes, info);
  if (!text) return pd_last_status() != PD_OK ? pd_last_status() : PD_ERR_INVALID;
  fputs(text, stdout);
  fputs("\n", stdout); /* print() adds a newline after the table's own */
  free(text);
  return PD_OK;
}
