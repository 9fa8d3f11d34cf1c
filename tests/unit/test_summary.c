/* paddle.summary and paddle.flops: the seed's LinearNet table line by line,
 * the rows of Paddle's LeNet docstring, memory estimates, trainable
 * counts, nesting, several inputs and outputs, and FLOPs per layer type. */
#include <stdlib.h>
#include <string.h>

#include "linear_net.h"
#include "test_util.h"

/* ---- test layers ------------------------------------------------------------------ */
/* A chain of sublayers run in order (a user layer, not a Sequential). */
typedef struct chain {
  pd_layer base;
  int n;
  pd_layer *l[12];
} chain;

static int chain_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  (void)n_in;
  (void)max_out;
  chain *c = (chain *)self;
  pd_tensor *x = in[0];
  for (int i = 0; i < c->n; i++) x = pd_layer_call1(c->l[i], x);
  out[0] = x;
  return x ? 1 : pd_last_status();
}

static pd_layer *chain_new(const pd_layer_type *type, int n, pd_layer **ls) {
  chain *c = pd_layer_new(sizeof *c, type);
  char name[16];
  for (int i = 0; i < n; i++) {
    snprintf(name, sizeof name, "%d", i);
    c->l[c->n++] = pd_layer_add_sublayer(&c->base, name, ls[i]);
  }
  return &c->base;
}

static const pd_layer_type chain_type = {"Chain", chain_forward, NULL, NULL};
static const pd_layer_type block_type = {"Block", chain_forward, NULL, NULL};
static const pd_layer_type sequential_type = {"Sequential", chain_forward, NULL, NULL};

/* A leaf that returns zeros of a fixed shape (or its input's shape), with
 * optional parameters and extra_repr: stands in for layer types by name. */
typedef struct fake {
  pd_layer base;
  int ndim; /* -1: the input's shape */
  int64_t shape[6];
  const char *repr;
} fake;

static int fake_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  (void)n_in;
  (void)max_out;
  fake *f = (fake *)self;
  out[0] = f->ndim < 0 ? pd_tanh(in[0]) : pd_zeros(f->ndim, f->shape, PD_FLOAT32);
  return out[0] ? 1 : pd_last_status();
}

static char *fake_repr(const pd_layer *self) {
  const fake *f = (const fake *)self;
  return f->repr ? strdup(f->repr) : NULL;
}

#define FAKE_TYPE(var, name) static const pd_layer_type var = {name, fake_forward, NULL, fake_repr}
FAKE_TYPE(conv2d_type, "Conv2D");
FAKE_TYPE(bn2d_type, "BatchNorm2D");
FAKE_TYPE(leaky_type, "LeakyReLU");
FAKE_TYPE(relu_type, "ReLU");
FAKE_TYPE(avgpool_type, "AvgPool2D");
FAKE_TYPE(adaptive_type, "AdaptiveAvgPool2D");
FAKE_TYPE(dropout_type, "Dropout");
FAKE_TYPE(tanhish_type, "Tanhish");
FAKE_TYPE(act_type, "Act");

static pd_layer *fake_new(const pd_layer_type *type, int ndim, const int64_t *shape, const char *repr) {
  fake *f = pd_layer_new(sizeof *f, type);
  f->ndim = ndim;
  for (int i = 0; i < ndim; i++) f->shape[i] = shape[i];
  f->repr = repr;
  return &f->base;
}

static void add_param(pd_layer *l, const char *name, int ndim, const int64_t *shape) {
  assert_non_null(pd_layer_create_parameter(l, name, ndim, shape, PD_FLOAT32, NULL, NULL, false));
}

/* Collects what a FILE * receives. */
typedef struct capture {
  char *buf;
  size_t len;
  FILE *f;
} capture;

static FILE *capture_open(capture *c) {
  c->buf = NULL;
  c->f = open_memstream(&c->buf, &c->len);
  assert_non_null(c->f);
  return c->f;
}

static char *capture_close(capture *c) {
  fclose(c->f);
  return c->buf;
}

/* Line k (0-based) of text, in a static buffer. */
static const char *line(const char *text, int k) {
  static char buf[512];
  const char *p = text;
  for (int i = 0; i < k && p; i++) {
    p = strchr(p, '\n');
    if (p) p++;
  }
  if (!p) return "";
  const char *e = strchr(p, '\n');
  size_t n = e ? (size_t)(e - p) : strlen(p);
  if (n >= sizeof buf) n = sizeof buf - 1;
  memcpy(buf, p, n);
  buf[n] = 0;
  return buf;
}

static int count_lines(const char *s) {
  int n = 0;
  for (; *s; s++) n += *s == '\n';
  return n;
}

/* ---- summary ----------------------------------------------------------------------- */
/* The seed's LinearNet: every line, padded as Python's "{:^w}" pads (odd
 * padding: the extra space on the right). Runs first, so its Linears are
 * linear_0 and linear_1. */
static void test_summary_linear_net_table(void **state) {
  (void)state;
  linear_net *net = linear_net_new();
  assert_string_equal(pd_layer_full_name(net->linear1), "linear_0");
  assert_string_equal(pd_layer_full_name(net->linear2), "linear_1");
  pd_summary_info info;
  char *s = pd_summary_string(&net->base, 1, (int[]){2}, (const int64_t *[]){SHAPE(1, 10)}, NULL, &info);
  assert_non_null(s);
  const char *want =
      "---------------------------------------------------------------------------\n"
      /* 15, 20, 20, 15 wide, one space apart */
      " Layer (type)  "
      " "
      "    Input Shape     "
      " "
      "    Output Shape    "
      " "
      "    Param #    \n"
      "===========================================================================\n"
      "   Linear-1    "
      " "
      "     [[1, 10]]      "
      " "
      "      [1, 10]       "
      " "
      "      110      \n"
      "   Linear-2    "
      " "
      "     [[1, 10]]      "
      " "
      "       [1, 1]       "
      " "
      "      11       \n"
      "===========================================================================\n"
      "Total params: 121\n"
      "Trainable params: 121\n"
      "Non-trainable params: 0\n"
      "---------------------------------------------------------------------------\n"
      "Input size (MB): 0.00\n"
      "Forward/backward pass size (MB): 0.00\n"
      "Params size (MB): 0.00\n"
      "Estimated Total Size (MB): 0.00\n"
      "---------------------------------------------------------------------------\n";
  assert_string_equal(s, want);
  free(s);
  assert_int_equal(info.total_params, 121);
  assert_int_equal(info.trainable_params, 121);
  assert_int_equal(info.non_trainable_params, 0);
  /* 10 input floats, 10 + 1 outputs (x2 for gradients), 121 params; 4 bytes each */
  double mb = 1024.0 * 1024.0;
  assert_true(info.input_size_mb == 10 * 4 / mb);
  assert_true(info.forward_backward_size_mb == 2.0 * 11 * 4 / mb);
  assert_true(info.params_size_mb == 121 * 4 / mb);
  assert_true(info.total_size_mb == info.input_size_mb + info.forward_backward_size_mb + info.params_size_mb);
  /* printed form */
  assert_int_equal(pd_summary(&net->base, 1, (int[]){2}, (const int64_t *[]){SHAPE(1, 10)}, NULL, NULL),
                   PD_OK);
  pd_layer_release(&net->base);
  expect_no_live_tensors();
}

/* The Linear rows of the LeNet example in paddle.summary's docstring
 * (nn.Linear(400, 120), (120, 84), (84, 10) on a [1, 400] input), with a
 * -1 batch dim standing for 1. */
static void test_summary_rows_of_paddle_docs(void **state) {
  (void)state;
  pd_layer *ls[3] = {pd_nn_linear(400, 120, NULL), pd_nn_linear(120, 84, NULL), pd_nn_linear(84, 10, NULL)};
  pd_layer *net = chain_new(&chain_type, 3, ls);
  pd_summary_info info;
  char *s = pd_summary_string(net, 1, (int[]){2}, (const int64_t *[]){SHAPE(-1, 400)}, NULL, &info);
  assert_non_null(s);
  char want[3][128];
  const char *fmt[3] = {"   Linear-%ld          [[1, 400]]            [1, 120]           48,120     ",
                        "   Linear-%ld          [[1, 120]]            [1, 84]            10,164     ",
                        "   Linear-%ld          [[1, 84]]             [1, 10]              850      "};
  for (int i = 0; i < 3; i++) {
    long idx = atol(strrchr(pd_layer_full_name(ls[i]), '_') + 1);
    snprintf(want[i], sizeof want[i], fmt[i], idx + 1);
    assert_string_equal(line(s, 3 + i), want[i]);
  }
  assert_string_equal(line(s, 7), "Total params: 59,134");
  assert_string_equal(line(s, 8), "Trainable params: 59,134");
  assert_string_equal(line(s, 9), "Non-trainable params: 0");
  assert_string_equal(line(s, 11), "Input size (MB): 0.00");
  assert_string_equal(line(s, 12), "Forward/backward pass size (MB): 0.00");
  assert_string_equal(line(s, 13), "Params size (MB): 0.23"); /* 59134 * 4 / 2^20 = 0.2256 */
  assert_string_equal(line(s, 14), "Estimated Total Size (MB): 0.23");
  assert_int_equal(count_lines(s), 16);
  assert_int_equal(info.total_params, 59134);
  free(s);
  pd_layer_release(net);
  expect_no_live_tensors();
}

/* Paddle counts a parameter as trainable when trainable=True and
 * stop_gradient=False. */
static void test_summary_trainable_split(void **state) {
  (void)state;
  pd_param_attr frozen = {.not_trainable = true};
  pd_nn_linear_opts o = {.weight_attr = &frozen};
  pd_layer *ls[2] = {pd_nn_linear(10, 10, &o), pd_nn_linear(10, 1, NULL)};
  pd_tensor_set_stop_gradient(pd_layer_parameter(ls[1], "bias"), true);
  pd_layer *net = chain_new(&chain_type, 2, ls);
  pd_summary_info info;
  char *s = pd_summary_string(net, 1, (int[]){2}, (const int64_t *[]){SHAPE(4, 10)}, NULL, &info);
  assert_non_null(s);
  assert_int_equal(info.total_params, 121);
  assert_int_equal(info.trainable_params, 10 + 10); /* the first bias, the second weight */
  assert_int_equal(info.non_trainable_params, 101);
  assert_non_null(strstr(s, "\nTrainable params: 20\nNon-trainable params: 101\n"));
  assert_non_null(strstr(s, "[[4, 10]]"));
  free(s);
  pd_layer_release(net);
  expect_no_live_tensors();
}

/* Rows come in the order layers finish (a block after its children); the
 * net itself is not a row unless it has no sublayers; Sequential and
 * LayerList containers are not rows. */
static void test_summary_nesting(void **state) {
  (void)state;
  pd_layer *lin = pd_nn_linear(6, 6, NULL);
  long li = atol(strrchr(pd_layer_full_name(lin), '_') + 1);
  pd_layer *act = fake_new(&act_type, -1, NULL, NULL);
  pd_layer *block = chain_new(&block_type, 2, (pd_layer *[]){lin, act});
  pd_layer *seq = chain_new(&sequential_type, 1, (pd_layer *[]){block});
  pd_layer *net = chain_new(&chain_type, 1, (pd_layer *[]){seq});
  char *s = pd_summary_string(net, 1, (int[]){2}, (const int64_t *[]){SHAPE(2, 6)}, NULL, NULL);
  assert_non_null(s);
  char key[32];
  snprintf(key, sizeof key, "Linear-%ld", li + 1);
  assert_non_null(strstr(line(s, 3), key));
  assert_non_null(strstr(line(s, 4), "Act-1"));
  assert_non_null(strstr(line(s, 5), "Block-1"));
  assert_non_null(strstr(line(s, 5), "   0   ")); /* no parameters of its own */
  assert_int_equal(line(s, 6)[0], '=');
  assert_null(strstr(s, "Sequential"));
  assert_null(strstr(s, "Chain"));
  assert_non_null(strstr(s, "Total params: 42\n"));
  free(s);
  /* a net without sublayers is its own row */
  s = pd_summary_string(lin, 1, (int[]){1}, (const int64_t *[]){SHAPE(6)}, NULL, NULL);
  assert_non_null(s);
  assert_non_null(strstr(line(s, 3), key));
  assert_non_null(strstr(line(s, 3), "[[6]]"));
  assert_non_null(strstr(s, "Total params: 42\n"));
  free(s);
  pd_layer_release(net);
  expect_no_live_tensors();
}

/* Two inputs and two outputs; input dtypes; a layer called twice keeps one
 * row (its last call). */
typedef struct two_io {
  pd_layer base;
  pd_layer *lin;
  pd_dtype seen[2];
} two_io;

static int two_io_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  (void)max_out;
  two_io *t = (two_io *)self;
  if (n_in != 2) return pd_set_error(PD_ERR_INVALID, "TwoIO: expects 2 inputs, got %d", n_in);
  t->seen[0] = pd_tensor_dtype(in[0]);
  t->seen[1] = pd_tensor_dtype(in[1]);
  pd_tensor *y = pd_layer_call1(t->lin, pd_cast(in[0], PD_FLOAT32));
  pd_tensor *z = pd_layer_call1(t->lin, pd_cast(in[1], PD_FLOAT32));
  out[0] = y;
  out[1] = z;
  return y && z ? 2 : pd_last_status();
}

static const pd_layer_type two_io_type = {"TwoIO", two_io_forward, NULL, NULL};

typedef struct wrap {
  pd_layer base;
  pd_layer *inner;
} wrap;

static int wrap_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  return pd_layer_call(((wrap *)self)->inner, in, n_in, out, max_out);
}

static const pd_layer_type wrap_type = {"Wrap", wrap_forward, NULL, NULL};

static void test_summary_inputs_and_outputs(void **state) {
  (void)state;
  two_io *t = pd_layer_new(sizeof *t, &two_io_type);
  t->lin = pd_layer_add_sublayer(&t->base, "lin", pd_nn_linear(3, 2, NULL));
  wrap *w = pd_layer_new(sizeof *w, &wrap_type);
  w->inner = pd_layer_add_sublayer(&w->base, "inner", &t->base);
  pd_summary_info info;
  char *s = pd_summary_string(&w->base, 2, (int[]){2, 3}, (const int64_t *[]){SHAPE(1, 3), SHAPE(2, 1, 3)},
                              (pd_dtype[]){PD_INT64, PD_FLOAT64}, &info);
  assert_non_null(s);
  assert_int_equal(t->seen[0], PD_INT64);
  assert_int_equal(t->seen[1], PD_FLOAT64);
  /* the Linear's row shows its last call; TwoIO lists both inputs and outputs */
  assert_non_null(strstr(line(s, 3), "[[2, 1, 3]]"));
  assert_non_null(strstr(line(s, 3), "[2, 1, 2]"));
  assert_non_null(strstr(line(s, 4), "TwoIO-1"));
  assert_non_null(strstr(line(s, 4), "[[1, 3], [2, 1, 3]]"));
  assert_non_null(strstr(line(s, 4), "[[1, 2], [2, 1, 2]]"));
  assert_int_equal(count_lines(s), 15);
  /* inputs 3 + 6 floats; outputs 4 (Linear, last call) + 2 + 4 (TwoIO) */
  double mb = 1024.0 * 1024.0;
  assert_true(info.input_size_mb == 3 * 4 / mb + 6 * 4 / mb);
  assert_true(info.forward_backward_size_mb == 2.0 * 10 * 4 / mb);
  free(s);
  /* given tensors (paddle.summary(net, input=...)) */
  pd_scope_begin();
  pd_tensor *a = pd_ones(2, SHAPE(5, 3), PD_FLOAT32), *b = pd_ones(2, SHAPE(1, 3), PD_FLOAT32);
  s = pd_summary_string_inputs(&w->base, (pd_tensor *[]){a, b}, 2, &info);
  assert_non_null(s);
  assert_non_null(strstr(line(s, 4), "[[5, 3], [1, 3]]"));
  assert_true(info.input_size_mb == 18 * 4 / mb);
  free(s);
  pd_scope_end();
  pd_layer_release(&w->base);
  expect_no_live_tensors();
}

/* Columns widen to fit, and the rules with them. */
static void test_summary_wide_columns(void **state) {
  (void)state;
  pd_layer *net = fake_new(&act_type, -1, NULL, NULL);
  char *s =
      pd_summary_string(net, 1, (int[]){8}, (const int64_t *[]){SHAPE(1, 2, 3, 4, 5, 6, 7, 8)}, NULL, NULL);
  assert_non_null(s);
  /* input "[[1, 2, 3, 4, 5, 6, 7, 8]]" is 26 wide, output 24: 15 + 26 + 24 + 15 + 5 = 85 */
  char rule[90];
  memset(rule, '-', 85);
  rule[85] = 0;
  assert_string_equal(line(s, 0), rule);
  assert_string_equal(line(s, 1),
                      " Layer (type)          Input Shape               Output Shape           Param #    ");
  char row[128];
  long idx = atol(strrchr(pd_layer_full_name(net), '_') + 1);
  assert_true(idx < 9);
  snprintf(row, sizeof row,
           "     Act-%ld      [[1, 2, 3, 4, 5, 6, 7, 8]] [1, 2, 3, 4, 5, 6, 7, 8]        0       ", idx + 1);
  assert_string_equal(line(s, 3), row);
  assert_string_equal(line(s, 13), rule);
  assert_int_equal(count_lines(s), 14);
  /* 40320 elements: input 0.15 MB, outputs 2 x 0.15 MB */
  assert_string_equal(line(s, 9), "Input size (MB): 0.15");
  assert_string_equal(line(s, 10), "Forward/backward pass size (MB): 0.31");
  free(s);
  pd_layer_release(net);
  expect_no_live_tensors();
}

static void test_summary_modes_and_errors(void **state) {
  (void)state;
  linear_net *net = linear_net_new();
  /* training flags come back as they were */
  assert_true(net->base.training);
  char *s = pd_summary_string(&net->base, 1, (int[]){2}, (const int64_t *[]){SHAPE(1, 10)}, NULL, NULL);
  free(s);
  assert_true(net->base.training && net->linear1->training);
  pd_layer_eval(&net->base);
  s = pd_summary_string(&net->base, 1, (int[]){2}, (const int64_t *[]){SHAPE(1, 10)}, NULL, NULL);
  free(s);
  assert_false(net->base.training || net->linear1->training);
  /* a net in eval mode is left as it is, sublayers included */
  net->linear1->training = true;
  s = pd_summary_string(&net->base, 1, (int[]){2}, (const int64_t *[]){SHAPE(1, 10)}, NULL, NULL);
  free(s);
  assert_true(!net->base.training && net->linear1->training && !net->linear2->training);
  pd_layer_train(&net->base);
  /* bad input sizes */
  assert_null(pd_summary_string(&net->base, 1, (int[]){2}, (const int64_t *[]){SHAPE(-1, -1)}, NULL, NULL));
  expect_error(NULL, "summary", "only the batch dim");
  assert_null(pd_summary_string(&net->base, 1, (int[]){2}, (const int64_t *[]){SHAPE(1, 0)}, NULL, NULL));
  expect_error(NULL, "greater than zero, but got 0", NULL);
  assert_null(pd_summary_string(&net->base, 0, NULL, NULL, NULL, NULL));
  expect_error(NULL, "summary", "n_inputs");
  assert_null(pd_summary_string(NULL, 1, (int[]){1}, (const int64_t *[]){SHAPE(1)}, NULL, NULL));
  expect_error(NULL, "summary", "net is NULL");
  assert_null(
      pd_summary_string(&net->base, 1, (int[]){1}, (const int64_t *[]){SHAPE(1)}, (pd_dtype[]){99}, NULL));
  expect_error(NULL, "summary", "invalid dtype 99");
  assert_int_equal(pd_summary(NULL, 1, (int[]){1}, (const int64_t *[]){SHAPE(1)}, NULL, NULL),
                   PD_ERR_INVALID);
  pd_clear_error();
  /* a forward that fails: its error comes back, hooks are gone, mode restored */
  assert_null(pd_summary_string(&net->base, 1, (int[]){2}, (const int64_t *[]){SHAPE(1, 7)}, NULL, NULL));
  expect_error(NULL, "matmul", "7");
  assert_true(net->base.training);
  s = pd_summary_string(&net->base, 1, (int[]){2}, (const int64_t *[]){SHAPE(1, 10)}, NULL, NULL);
  assert_non_null(s);
  assert_int_equal(count_lines(s), 15); /* two rows, not more: the failed run left no hooks */
  free(s);
  pd_layer_release(&net->base);
  expect_no_live_tensors();
}

/* ---- flops ------------------------------------------------------------------------- */
/* Paddle counts a Linear as in_features * numel(output): for LinearNet on
 * [1, 10], 10 * 10 + 10 * 1 = 110. The table is Paddle's Table (str.center
 * padding: an odd margin puts the extra space left when the width is odd). */
static void test_flops_linear_net(void **state) {
  (void)state;
  linear_net *net = linear_net_new();
  /* runs second: names of equal length keep the table's widths fixed */
  assert_string_equal(pd_layer_full_name(net->linear1), "linear_2");
  assert_string_equal(pd_layer_full_name(net->linear2), "linear_3");
  assert_int_equal(pd_flops(&net->base, 2, SHAPE(1, 10), false), 110);
  capture cap;
  pd_flops_opts o = {.print_detail = true, .out = capture_open(&cap)};
  pd_flops_result r;
  assert_int_equal(pd_flops_with_opts(&net->base, 2, SHAPE(1, 10), &o, &r), 110);
  char *buf = capture_close(&cap);
  char want[2048];
  snprintf(want, sizeof want,
           "<class 'paddle.nn.layer.common.Linear'>'s flops has been counted\n"
           "+------------+-------------+--------------+--------+-------+\n"
           "| Layer Name | Input Shape | Output Shape | Params | Flops |\n"
           "+------------+-------------+--------------+--------+-------+\n"
           "|  %s  |   [1, 10]   |   [1, 10]    |  110   |  100  |\n"
           "|  %s  |   [1, 10]   |    [1, 1]    |   11   |   10  |\n"
           "+------------+-------------+--------------+--------+-------+\n"
           "Total Flops: 110     Total Params: 121\n",
           pd_layer_full_name(net->linear1), pd_layer_full_name(net->linear2));
  assert_string_equal(buf, want);
  free(buf);
  assert_int_equal(r.total_flops, 110);
  assert_int_equal(r.total_params, 121);
  assert_int_equal(r.n_rows, 2);
  assert_string_equal(r.rows[0].name, pd_layer_full_name(net->linear1));
  assert_int_equal(r.rows[0].flops, 100);
  assert_int_equal(r.rows[1].flops, 10);
  assert_int_equal(r.rows[1].params, 11);
  assert_int_equal(r.rows[1].out_ndim, 2);
  assert_int_equal(r.rows[1].out_shape[1], 1);
  assert_int_equal(r.n_unknown, 0);
  pd_flops_result_free(&r);
  /* batch 4: every count scales with the output rows */
  o = (pd_flops_opts){.quiet = true};
  assert_int_equal(pd_flops_with_opts(&net->base, 2, SHAPE(4, 10), &o, NULL), 440);
  assert_true(net->base.training);
  pd_layer_release(&net->base);
  expect_no_live_tensors();
}

static int64_t count_tanhish(pd_layer *l, pd_tensor *const *in, int n_in, pd_tensor *const *out, int n_out,
                             void *user) {
  (void)l;
  (void)n_in;
  (void)out;
  (void)n_out;
  *(int *)user += 1;
  return pd_tensor_numel(in[0]);
}

/* Each counter of Paddle's table, on stand-in layers of those type names. */
static void test_flops_per_type(void **state) {
  (void)state;
  /* Conv2D(4, 8, 3, groups=2): weight [8, 2, 3, 3], bias [8]; [1,4,10,10] -> [1,8,8,8] */
  pd_layer *conv = fake_new(&conv2d_type, 4, SHAPE(1, 8, 8, 8), "4, 8, kernel_size=[3, 3], groups=2");
  add_param(conv, "weight", 4, SHAPE(8, 2, 3, 3));
  add_param(conv, "bias", 1, SHAPE(8));
  pd_layer *bn = fake_new(&bn2d_type, 4, SHAPE(1, 8, 8, 8), NULL);
  add_param(bn, "weight", 1, SHAPE(8));
  add_param(bn, "bias", 1, SHAPE(8));
  pd_layer *leaky = fake_new(&leaky_type, 4, SHAPE(1, 8, 8, 8), NULL);
  pd_layer *relu = fake_new(&relu_type, 4, SHAPE(1, 8, 8, 8), NULL);
  pd_layer *pool = fake_new(&avgpool_type, 4, SHAPE(1, 8, 4, 4), NULL);
  pd_layer *adaptive = fake_new(&adaptive_type, 4, SHAPE(1, 8, 1, 1), NULL);
  pd_layer *drop = fake_new(&dropout_type, 4, SHAPE(1, 8, 1, 1), NULL);
  pd_layer *tanhish = fake_new(&tanhish_type, -1, NULL, NULL);
  pd_layer *net =
      chain_new(&chain_type, 8, (pd_layer *[]){conv, bn, leaky, relu, pool, adaptive, drop, tanhish});
  capture cap;
  pd_flops_opts o = {.out = capture_open(&cap)};
  pd_flops_result r;
  int64_t conv_ops = 512 * (4 / 2 * 9 + 1), bn_ops = 2 * 512, leaky_ops = 512, pool_ops = 128,
          adaptive_ops = (4 * 4 + 1) * 8;
  int64_t total = conv_ops + bn_ops + leaky_ops + pool_ops + adaptive_ops;
  assert_int_equal(pd_flops_with_opts(net, 4, SHAPE(1, 4, 10, 10), &o, &r), total);
  char *buf = capture_close(&cap);
  assert_string_equal(buf,
                      "<class 'paddle.nn.layer.conv.Conv2D'>'s flops has been counted\n"
                      "<class 'paddle.nn.layer.norm.BatchNorm2D'>'s flops has been counted\n"
                      "<class 'paddle.nn.layer.activation.LeakyReLU'>'s flops has been counted\n"
                      "<class 'paddle.nn.layer.activation.ReLU'>'s flops has been counted\n"
                      "<class 'paddle.nn.layer.pooling.AvgPool2D'>'s flops has been counted\n"
                      "<class 'paddle.nn.layer.pooling.AdaptiveAvgPool2D'>'s flops has been counted\n"
                      "<class 'paddle.nn.layer.common.Dropout'>'s flops has been counted\n"
                      "Cannot find suitable count function for <class 'Tanhish'>. Treat it as zero FLOPs.\n"
                      "Total Flops: 11528     Total Params: 168\n");
  free(buf);
  assert_int_equal(total, 11528);
  assert_int_equal(r.n_rows, 8);
  int64_t want[8] = {conv_ops, bn_ops, leaky_ops, 0, pool_ops, adaptive_ops, 0, 0};
  for (int i = 0; i < 8; i++) assert_int_equal(r.rows[i].flops, want[i]);
  assert_int_equal(r.rows[0].params, 8 * 2 * 9 + 8);
  assert_int_equal(r.n_unknown, 1);
  assert_string_equal(r.unknown_types[0], "Tanhish");
  pd_flops_result_free(&r);

  /* a custom counter (custom_ops) */
  int calls = 0;
  pd_flops_custom custom = {"Tanhish", count_tanhish, &calls};
  o = (pd_flops_opts){.out = capture_open(&cap), .custom_ops = &custom, .n_custom_ops = 1};
  assert_int_equal(pd_flops_with_opts(net, 4, SHAPE(1, 4, 10, 10), &o, &r), total + 8);
  buf = capture_close(&cap);
  assert_non_null(strstr(buf, "Customize Function has been applied to <class 'Tanhish'>\n"));
  assert_int_equal(calls, 1);
  assert_int_equal(r.n_unknown, 0);
  free(buf);
  pd_flops_result_free(&r);

  /* without "groups=" in extra_repr the conv counts groups = 1 */
  ((fake *)conv)->repr = "4, 8, kernel_size=[3, 3]";
  o = (pd_flops_opts){.quiet = true};
  assert_int_equal(pd_flops_with_opts(net, 4, SHAPE(1, 4, 10, 10), &o, &r),
                   total - conv_ops + 512 * (4 * 9 + 1));
  assert_int_equal(r.rows[0].flops, 512 * 37);
  pd_flops_result_free(&r);
  pd_layer_release(net);
  expect_no_live_tensors();
}

/* A leaf called twice adds both calls; a net that is itself a leaf counts. */
typedef struct twice {
  pd_layer base;
  pd_layer *lin;
} twice;

static int twice_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  (void)n_in;
  (void)max_out;
  twice *t = (twice *)self;
  out[0] = pd_layer_call1(t->lin, pd_layer_call1(t->lin, in[0]));
  return out[0] ? 1 : pd_last_status();
}

static const pd_layer_type twice_type = {"Twice", twice_forward, NULL, NULL};

static void test_flops_shared_and_bare(void **state) {
  (void)state;
  twice *t = pd_layer_new(sizeof *t, &twice_type);
  t->lin = pd_layer_add_sublayer(&t->base, "lin", pd_nn_linear(5, 5, NULL));
  pd_flops_opts o = {.quiet = true};
  pd_flops_result r;
  assert_int_equal(pd_flops_with_opts(&t->base, 2, SHAPE(3, 5), &o, &r), 2 * 5 * 15);
  assert_int_equal(r.n_rows, 1);
  assert_int_equal(r.total_params, 30);
  pd_flops_result_free(&r);
  assert_int_equal(pd_flops_with_opts(t->lin, 2, SHAPE(3, 5), &o, &r), 5 * 15);
  assert_int_equal(r.n_rows, 1);
  pd_flops_result_free(&r);
  /* errors */
  assert_int_equal(pd_flops(NULL, 2, SHAPE(1, 5), false), PD_ERR_INVALID);
  expect_error(NULL, "flops", "net is NULL");
  assert_int_equal(pd_flops_with_opts(&t->base, 2, SHAPE(1, -5), &o, NULL), PD_ERR_INVALID);
  expect_error(NULL, "flops", "[1, -5]");
  assert_int_equal(pd_flops_with_opts(&t->base, 12, SHAPE(1, 5), &o, NULL), PD_ERR_INVALID);
  expect_error(NULL, "flops", "12 dims");
  pd_flops_custom bad = {NULL, NULL, NULL};
  pd_flops_opts ob = {.quiet = true, .custom_ops = &bad, .n_custom_ops = 1};
  assert_int_equal(pd_flops_with_opts(&t->base, 2, SHAPE(1, 5), &ob, NULL), PD_ERR_INVALID);
  expect_error(NULL, "flops", "custom_ops[0]");
  assert_int_equal(pd_flops_with_opts(&t->base, 2, SHAPE(1, 4), &o, &r), PD_ERR_SHAPE);
  expect_error(NULL, "matmul", NULL);
  assert_int_equal(r.n_rows, 0);
  assert_int_equal(pd_flops_with_opts(&t->base, 2, SHAPE(1, 5), &o, NULL), 50); /* no hooks left behind */
  pd_layer_release(&t->base);
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_summary_linear_net_table),
      cmocka_unit_test(test_flops_linear_net),
      cmocka_unit_test(test_summary_rows_of_paddle_docs),
      cmocka_unit_test(test_summary_trainable_split),
      cmocka_unit_test(test_summary_nesting),
      cmocka_unit_test(test_summary_inputs_and_outputs),
      cmocka_unit_test(test_summary_wide_columns),
      cmocka_unit_test(test_summary_modes_and_errors),
      cmocka_unit_test(test_flops_per_type),
      cmocka_unit_test(test_flops_shared_and_bare),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
