/* paddle.flops for layers: one forward pass with a post-hook on every leaf
 * layer, counting per layer type as Paddle's dynamic counter does. */
#include <stdlib.h>
#include <string.h>

#include "../core/core_internal.h"
#include "../core/strbuf.h"
#include "paddlec/autograd.h"
#include "paddlec/summary.h"
#include "paddlec/creation.h"

#define MAX_IO 64

typedef enum fkind {
  FK_UNKNOWN = 0,
  FK_CUSTOM,
  FK_CONV,
  FK_BN,
  FK_ZERO,
  FK_LEAKY_RELU,
  FK_LINEAR,
  FK_AVGPOOL,
  FK_ADAPTIVE_AVGPOOL,
} fkind;

/* Paddle's table of counters, with the module each class lives in (for the
 * "<class '...'>" lines it prints). */
static const struct {
  const char *type, *module;
  fkind kind;
} k_counters[] = {
    {"Conv1D", "conv", FK_CONV},
    {"Conv2D", "conv", FK_CONV},
    {"Conv3D", "conv", FK_CONV},
    {"Conv1DTranspose", "conv", FK_CONV},
    {"Conv2DTranspose", "conv", FK_CONV},
    {"Conv3DTranspose", "conv", FK_CONV},
    {"BatchNorm2D", "norm", FK_BN},
    {"BatchNorm", "norm", FK_BN},
    {"ReLU", "activation", FK_ZERO},
    {"ReLU6", "activation", FK_ZERO},
    {"LeakyReLU", "activation", FK_LEAKY_RELU},
    {"Linear", "common", FK_LINEAR},
    {"Dropout", "common", FK_ZERO},
    {"AvgPool1D", "pooling", FK_AVGPOOL},
    {"AvgPool2D", "pooling", FK_AVGPOOL},
    {"AvgPool3D", "pooling", FK_AVGPOOL},
    {"AdaptiveAvgPool1D", "pooling", FK_ADAPTIVE_AVGPOOL},
    {"AdaptiveAvgPool2D", "pooling", FK_ADAPTIVE_AVGPOOL},
    {"AdaptiveAvgPool3D", "pooling", FK_ADAPTIVE_AVGPOOL},
};
#define N_COUNTERS (int)(sizeof k_counters / sizeof k_counters[0])

typedef struct leaf {
  pd_layer *l;
  char *name;
  fkind kind;
  const pd_flops_custom *custom;
  int hook_id;
  bool called;
  int64_t ops, params;
  int in_ndim, out_ndim;
  int64_t in_shape[PD_MAX_DIMS], out_shape[PD_MAX_DIMS];
} leaf;

static int64_t numel_of(const pd_tensor *t) { return pd_tensor_numel(t); }

/* An integer "key=value" of the layer's extra_repr (Paddle's convs print
 * "groups=2" when groups != 1), or dflt. */
static int64_t repr_int(const pd_layer *l, const char *key, int64_t dflt) {
  if (!l->type->extra_repr) return dflt;
  char *s = l->type->extra_repr(l);
  if (!s) return dflt;
  size_t kl = strlen(key);
  int64_t v = dflt;
  for (const char *p = strstr(s, key); p; p = strstr(p + 1, key)) {
    if ((p == s || p[-1] == ' ' || p[-1] == ',' || p[-1] == '(') && p[kl] == '=') {
      char *end;
      long long x = strtoll(p + kl + 1, &end, 10);
      if (end != p + kl + 1) v = x;
      break;
    }
  }
  free(s);
  return v;
}

static int64_t count_builtin(const leaf *f, pd_tensor *const *in, int n_in, pd_tensor *const *out,
                             int n_out) {
  const pd_tensor *x = n_in > 0 ? in[0] : NULL, *y = n_out > 0 ? out[0] : NULL;
  switch (f->kind) {
    case FK_LINEAR: {
      const pd_tensor *w = pd_layer_parameter(f->l, "weight");
      if (!w || !y || pd_tensor_ndim(w) < 1) return 0;
      int64_t v = pd_tensor_shape(w)[0] * numel_of(y);
      return v < 0 ? -v : v;
    }
    case FK_CONV: {
      const pd_tensor *w = pd_layer_parameter(f->l, "weight");
      if (!w || !x || !y || pd_tensor_ndim(x) < 2) return 0;
      double kernel = 1;
      for (int i = 2; i < pd_tensor_ndim(w); i++) kernel *= (double)pd_tensor_shape(w)[i];
      int64_t groups = repr_int(f->l, "groups", 1);
      if (groups <= 0) groups = 1;
      double bias = pd_layer_parameter(f->l, "bias") ? 1 : 0;
      double v = (double)numel_of(y) * ((double)pd_tensor_shape(x)[1] / (double)groups * kernel + bias);
      int64_t r = (int64_t)v;
      return r < 0 ? -r : r;
    }
    case FK_BN:
      return x ? 2 * numel_of(x) : 0; /* Paddle counts in eval mode */
    case FK_LEAKY_RELU:
      return x ? numel_of(x) : 0;
    case FK_AVGPOOL:
      return y ? numel_of(y) : 0;
    case FK_ADAPTIVE_AVGPOOL: {
      if (!x || !y) return 0;
      int nx = pd_tensor_ndim(x), ny = pd_tensor_ndim(y), ns = (nx < ny ? nx : ny) - 2;
      int64_t add = 1;
      for (int i = 0; i < ns; i++) {
        int64_t a = pd_tensor_shape(x)[2 + i], b = pd_tensor_shape(y)[2 + i];
        add *= b > 0 ? a / b : 0;
      }
      int64_t v = (add + 1) * numel_of(y);
      return v < 0 ? -v : v;
    }
    default:
      return 0;
  }
}

static int flops_hook(pd_layer *l, pd_tensor *const *in, int n_in, pd_tensor **out, int n_out, void *user) {
  leaf *f = user;
  (void)l;
  int64_t ops = 0;
  if (f->kind == FK_CUSTOM) {
    ops = f->custom->fn(f->l, in, n_in, out, n_out, f->custom->user);
    if (ops < 0) {
      if (pd_last_status() == PD_OK)
        pd_set_error(PD_ERR_INVALID, "flops: custom counter for %s returned %lld", f->custom->type_name,
                     (long long)ops);
      return pd_last_status();
    }
  } else {
    ops = count_builtin(f, in, n_in, out, n_out);
  }
  f->ops += ops;
  pd_named_tensors ps;
  if (pd_layer_parameters(f->l, &ps) == PD_OK) {
    f->params = 0;
    for (int i = 0; i < ps.n; i++) f->params += pd_tensor_numel(ps.tensors[i]);
    pd_named_tensors_free(&ps);
  }
  f->called = true;
  f->in_ndim = n_in > 0 ? pd_tensor_ndim(in[0]) : 0;
  for (int i = 0; i < f->in_ndim; i++) f->in_shape[i] = pd_tensor_shape(in[0])[i];
  f->out_ndim = n_out > 0 ? pd_tensor_ndim(out[0]) : 0;
  for (int i = 0; i < f->out_ndim; i++) f->out_shape[i] = pd_tensor_shape(out[0])[i];
  return 0;
}

/* Python's str.center: an odd padding puts the extra space left when the
 * width is odd. */
static void py_center(pd_strbuf *b, const char *s, size_t w) {
  size_t n = strlen(s);
  if (n >= w) {
    pd_sb_puts(b, s);
    return;
  }
  size_t marg = w - n, left = marg / 2 + (marg & w & 1);
  pd_sb_repeat(b, ' ', left);
  pd_sb_puts(b, s);
  pd_sb_repeat(b, ' ', marg - left);
}

static void print_table(FILE *out, int n_rows, const pd_flops_row *rows) {
  enum { NC = 5 };
  static const char *const heads[NC] = {"Layer Name", "Input Shape", "Output Shape", "Params", "Flops"};
  char ***cells = calloc((size_t)n_rows + 1, sizeof *cells);
  if (!cells) return;
  size_t w[NC];
  for (int c = 0; c < NC; c++) w[c] = strlen(heads[c]);
  for (int r = 0; r < n_rows; r++) {
    cells[r] = calloc(NC, sizeof(char *));
    if (!cells[r]) continue;
    pd_strbuf s[NC] = {{0}};
    pd_sb_puts(&s[0], rows[r].name);
    pd_sb_shape(&s[1], rows[r].in_ndim, rows[r].in_shape);
    pd_sb_shape(&s[2], rows[r].out_ndim, rows[r].out_shape);
    pd_sb_printf(&s[3], "%lld", (long long)rows[r].params);
    pd_sb_printf(&s[4], "%lld", (long long)rows[r].flops);
    for (int c = 0; c < NC; c++) {
      cells[r][c] = s[c].s;
      if (s[c].s && strlen(s[c].s) > w[c]) w[c] = strlen(s[c].s);
    }
  }
  pd_strbuf b = {0};
  pd_strbuf shelf = {0};
  for (int c = 0; c < NC; c++) {
    pd_sb_puts(&shelf, "+");
    pd_sb_repeat(&shelf, '-', w[c] + 2);
  }
  pd_sb_puts(&shelf, "+\n");
  pd_sb_puts(&b, shelf.s ? shelf.s : "");
  for (int c = 0; c < NC; c++) {
    pd_sb_puts(&b, "|");
    py_center(&b, heads[c], w[c] + 2);
  }
  pd_sb_puts(&b, "|\n");
  pd_sb_puts(&b, shelf.s ? shelf.s : "");
  for (int r = 0; r < n_rows; r++) {
    if (!cells[r]) continue;
    for (int c = 0; c < NC; c++) {
      pd_sb_puts(&b, "|");
      py_center(&b, cells[r][c] ? cells[r][c] : "", w[c] + 2);
    }
    pd_sb_puts(&b, "|\n");
  }
  pd_sb_puts(&b, shelf.s ? shelf.s : "");
  if (b.s) fputs(b.s, out);
  free(b.s);
  free(shelf.s);
  for (int r = 0; r < n_rows; r++) {
    for (int c = 0; cells[r] && c < NC; c++) free(cells[r][c]);
    free(cells[r]);
  }
  free(cells);
}

void pd_flops_result_free(pd_flops_result *r) {
  if (!r) return;
  for (int i = 0; i < r->n_rows; i++) free(r->rows[i].name);
  free(r->rows);
  for (int i = 0; i < r->n_unknown; i++) free(r->unknown_types[i]);
  free(r->unknown_types);
  *r = (pd_flops_result){0};
}

static bool is_leaf(const pd_layer *l) {
  pd_named_layers s;
  if (pd_layer_named_sublayers(l, &s) != PD_OK) return false;
  bool leaf = s.n == 0;
  pd_named_layers_free(&s);
  return leaf;
}

static void type_line(FILE *out, const char *type, const char *module) {
  if (module)
    fprintf(out, "<class 'paddle.nn.layer.%s.%s'>", module, type);
  else
    fprintf(out, "<class '%s'>", type);
}

int64_t pd_flops_with_opts(pd_layer *net, int ndim, const int64_t *input_shape, const pd_flops_opts *opts,
                           pd_flops_result *result) {
  static const pd_flops_opts defaults;
  if (!opts) opts = &defaults;
  if (result) *result = (pd_flops_result){0};
  if (!net) return pd_set_error(PD_ERR_INVALID, "flops: net is NULL");
  if (ndim < 0 || ndim > PD_MAX_DIMS || (ndim > 0 && !input_shape))
    return pd_set_error(PD_ERR_INVALID, "flops: input_size has %d dims (must be 0..%d)", ndim, PD_MAX_DIMS);
  for (int d = 0; d < ndim; d++)
    if (input_shape[d] < 0) {
      char sh[200];
      return pd_set_error(PD_ERR_INVALID, "flops: input_size %s has a negative dim %d",
                          pd_shape_str(ndim, input_shape, sh, sizeof sh), d);
    }
  if (opts->n_custom_ops < 0 || (opts->n_custom_ops > 0 && !opts->custom_ops))
    return pd_set_error(PD_ERR_INVALID, "flops: custom_ops is NULL with n_custom_ops = %d",
                        opts->n_custom_ops);
  for (int i = 0; i < opts->n_custom_ops; i++)
    if (!opts->custom_ops[i].type_name || !opts->custom_ops[i].fn)
      return pd_set_error(PD_ERR_INVALID, "flops: custom_ops[%d] has a NULL type name or function", i);
  FILE *out = opts->quiet ? NULL : opts->out ? opts->out : stdout;

  pd_named_layers subs;
  pd_status st = pd_layer_named_sublayers(net, &subs);
  if (st != PD_OK) return st;
  leaf *leaves = calloc((size_t)subs.n + 1, sizeof *leaves);
  const char **types = calloc((size_t)subs.n + 1, sizeof *types); /* types seen so far */
  char **unknown = calloc((size_t)subs.n + 1, sizeof *unknown);
  int nl = 0, nt = 0, nu = 0;
  if (!leaves || !types || !unknown) st = pd_set_error(PD_ERR_MEMORY, "flops: out of memory");
  /* the leaves, in named_sublayers order (the net itself when it has none) */
  for (int i = subs.n ? 0 : -1; i < subs.n && st == PD_OK; i++) {
    pd_layer *l = i < 0 ? net : subs.layers[i];
    if (i >= 0 && !is_leaf(l)) continue;
    leaf *f = &leaves[nl];
    f->l = l;
    f->name = strdup(pd_layer_full_name(l));
    if (!f->name) {
      st = pd_set_error(PD_ERR_MEMORY, "flops: out of memory");
      break;
    }
    nl++;
    const char *tn = l->type->name ? l->type->name : "Layer";
    const char *module = NULL;
    for (int k = 0; k < opts->n_custom_ops && !f->custom; k++)
      if (strcmp(opts->custom_ops[k].type_name, tn) == 0) f->custom = &opts->custom_ops[k];
    for (int k = 0; k < N_COUNTERS; k++)
      if (strcmp(k_counters[k].type, tn) == 0) {
        module = k_counters[k].module;
        if (!f->custom) f->kind = k_counters[k].kind;
      }
    if (f->custom) f->kind = FK_CUSTOM;
    bool seen = false;
    for (int k = 0; k < nt && !seen; k++) seen = strcmp(types[k], tn) == 0;
    if (!seen) {
      types[nt++] = tn;
      if (f->kind == FK_UNKNOWN) {
        unknown[nu] = strdup(tn);
        if (!unknown[nu])
          st = pd_set_error(PD_ERR_MEMORY, "flops: out of memory");
        else
          nu++;
      }
      if (out && f->kind == FK_CUSTOM) {
        fputs("Customize Function has been applied to ", out);
        type_line(out, tn, module);
        fputs("\n", out);
      } else if (out && f->kind != FK_UNKNOWN) {
        type_line(out, tn, module);
        fputs("'s flops has been counted\n", out);
      } else if (out) {
        fputs("Cannot find suitable count function for ", out);
        type_line(out, tn, module);
        fputs(". Treat it as zero FLOPs.\n", out);
      }
    }
    if (st == PD_OK) {
      f->hook_id = pd_layer_register_forward_post_hook(l, flops_hook, f);
      if (f->hook_id < 0) st = (pd_status)f->hook_id;
    }
  }
  bool was_training = net->training;
  pd_layer_eval(net);
  pd_internal_enter();
  pd_no_grad_begin();
  if (st == PD_OK) {
    pd_tensor *x = pd_randn(ndim, input_shape, PD_FLOAT32);
    pd_tensor *y[MAX_IO];
    int n = x ? pd_layer_call(net, &x, 1, y, MAX_IO) : pd_last_status();
    for (int k = 0; k < n; k++) pd_tensor_release(y[k]);
    pd_tensor_release(x);
    if (n < 0) st = (pd_status)n;
  }
  pd_no_grad_end();
  pd_internal_leave();
  if (was_training) pd_layer_train(net);
  for (int i = 0; i < nl; i++)
    if (leaves[i].hook_id > 0) pd_layer_remove_hook(leaves[i].l, leaves[i].hook_id);

  int64_t total_ops = 0, total_params = 0;
  int n_rows = 0;
  pd_flops_row *rows = st == PD_OK ? calloc((size_t)nl + 1, sizeof *rows) : NULL;
  if (st == PD_OK && !rows) st = pd_set_error(PD_ERR_MEMORY, "flops: out of memory");
  for (int i = 0; i < nl && st == PD_OK; i++) {
    leaf *f = &leaves[i];
    if (!f->called) continue;
    total_ops += f->ops;
    total_params += f->params;
    pd_flops_row *r = &rows[n_rows++];
    r->name = f->name;
    f->name = NULL;
    r->in_ndim = f->in_ndim;
    r->out_ndim = f->out_ndim;
    memcpy(r->in_shape, f->in_shape, sizeof r->in_shape);
    memcpy(r->out_shape, f->out_shape, sizeof r->out_shape);
    r->params = f->params;
    r->flops = f->ops;
  }
  if (st == PD_OK && out) {
    if (opts->print_detail) print_table(out, n_rows, rows);
    fprintf(out, "Total Flops: %lld     Total Params: %lld\n", (long long)total_ops, (long long)total_params);
  }
  if (st == PD_OK && result) {
    *result = (pd_flops_result){total_ops, total_params, n_rows, rows, nu, unknown};
    rows = NULL;
    unknown = NULL;
    nu = n_rows = 0;
  }
  for (int i = 0; i < n_rows; i++) free(rows[i].name);
  free(rows);
  for (int i = 0; i < nu; i++) free(unknown[i]);
  free(unknown);
  for (int i = 0; i < nl; i++) free(leaves[i].name);
  free(leaves);
  free(types);
  pd_named_layers_free(&subs);
  return st == PD_OK ? total_ops : st;
}

int64_t pd_flops(pd_layer *net, int ndim, const int64_t *input_shape, bool print_detail) {
  pd_flops_opts o = {.print_detail = print_detail};
  return pd_flops_with_opts(net, ndim, input_shape, &o, NULL);
}
