/* dist.to_static with ops whose attributes hold their output's shape, on
 * a batch split over 2 processes (mesh "dp", a ShardDataloader):
 *
 *   h = x @ w                       w replicated: h Shard(0)
 *   nll_loss(log_softmax(h), label) 'sum' and 'none': nll_loss_grad's
 *                                   x_shape; 'mean': the local step
 *                                   c_nll_loss (each shard's sum and
 *                                   total weight all-reduced) and
 *                                   c_nll_loss_grad with its x_shape,
 *                                   no gather of the batch
 *   slice(h, columns 1..3)          slice_grad's x_shape (the batch dim
 *                                   taken whole keeps its shard)
 *   topk(h, 2) values               its backward's scatter_along shape
 *
 * Each rank's partitioned Program must give those ops the shard's shape
 * (2 rows, not the global 4); the losses of a few SGD steps and the
 * trained weight equal the same model trained eagerly in one process to
 * 1e-6. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist_model_checks.h"
#include "dist_ranks.h"
#include "paddlec.h"
#include "test_util.h"

enum { B = 4, IN = 3, H = 5, K = 2, STEPS = 3 };

/* The op under test, in the loss. */
typedef enum which { NLL_SUM, NLL_NONE, NLL_MEAN, SLICE, TOPK } which;

static which g_which;

typedef struct net {
  pd_layer base;
  pd_tensor *w; /* borrowed from the base's parameters */
} net;

static int net_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  net *m = (net *)self;
  if (n_in < 1 || max_out < 1) return PD_ERR_INVALID;
  out[0] = pd_matmul(in[0], m->w, false, false);
  return out[0] ? 1 : pd_last_status();
}

static const pd_layer_type k_net_type = {.name = "ShapeAttrsNet", .forward = net_forward};

/* loss(h, label): the op under test on h, reduced to a scalar. */
static int loss_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  (void)self;
  if (n_in < 2 || max_out < 1) return PD_ERR_INVALID;
  pd_tensor *h = in[0], *label = in[1], *r = NULL;
  switch (g_which) {
    case NLL_SUM:
      r = pd_nll_loss(pd_log_softmax(h, 1), label, NULL, -100, PD_REDUCTION_SUM);
      break;
    case NLL_MEAN: /* label 1 ignored: the total weight differs between the shards */
      r = pd_nll_loss(pd_log_softmax(h, 1), label, NULL, 1, PD_REDUCTION_MEAN);
      break;
    case NLL_NONE:
      r = pd_sum(pd_square(pd_nll_loss(pd_log_softmax(h, 1), label, NULL, -100, PD_REDUCTION_NONE)), NULL, 0,
                 false);
      break;
    case SLICE: {
      pd_tensor *s = pd_slice(h, 1, (const int64_t[]){1}, (const int64_t[]){1}, (const int64_t[]){1 + K});
      r = s ? pd_sum(pd_square(pd_subtract(s, label)), NULL, 0, false) : NULL;
      break;
    }
    case TOPK: {
      pd_tensor *v = NULL, *idx = NULL;
      if (pd_topk(h, K, 1, true, true, &v, &idx) == PD_OK)
        r = pd_sum(pd_square(pd_subtract(v, label)), NULL, 0, false);
      break;
    }
  }
  out[0] = r;
  return r ? 1 : pd_last_status();
}

static const pd_layer_type k_loss_type = {.name = "ShapeAttrsLoss", .forward = loss_forward};

static net *net_new(void) {
  net *m = pd_layer_new(sizeof *m, &k_net_type);
  if (!m) return NULL;
  double v[IN * H];
  for (int i = 0; i < IN * H; i++) v[i] = 0.4 * sin(0.3 + 0.71 * i);
  pd_scope_begin(); /* the scope drops the creation's reference; the layer keeps one */
  pd_tensor *t = pd_tensor_from_f64(v, PD_FLOAT32, 2, (const int64_t[]){IN, H});
  bool ok = t && pd_layer_add_parameter(&m->base, "w", t) == PD_OK;
  pd_scope_end();
  m->w = ok ? pd_layer_parameter(&m->base, "w") : NULL;
  if (!m->w) {
    pd_layer_release(&m->base);
    return NULL;
  }
  return m;
}

/* The dataset's STEPS batches of B: x [STEPS B, IN] and the labels,
 * int64 classes [STEPS B] for nll_loss, else floats [STEPS B, K]. */
static void dataset_tensors(pd_tensor **x, pd_tensor **label) {
  double xs[STEPS * B * IN], ls[STEPS * B * K];
  for (int i = 0; i < STEPS * B * IN; i++) xs[i] = sin(0.37 * (i + 1));
  bool nll = g_which == NLL_SUM || g_which == NLL_NONE || g_which == NLL_MEAN;
  for (int i = 0; i < STEPS * B * K; i++) ls[i] = nll ? (double)((3 * i + 1) % H) : cos(0.23 * (i + 1));
  *x = pd_tensor_from_f64(xs, PD_FLOAT32, 2, (const int64_t[]){STEPS * B, IN});
  *label = nll ? pd_tensor_from_f64(ls, PD_INT64, 1, (const int64_t[]){STEPS * B})
               : pd_tensor_from_f64(ls, PD_FLOAT32, 2, (const int64_t[]){STEPS * B, K});
}

typedef struct result {
  double loss[STEPS];
  float w[IN * H];
} result;

static int run_eager(int rank, result *r) {
  net *m = net_new();
  pd_layer *loss_fn = pd_layer_new(sizeof(pd_layer), &k_loss_type);
  DIST_CHECK(m && loss_fn, 1);
  pd_optimizer *opt = pd_optimizer_sgd(0.05, &m->w, 1, NULL);
  pd_scope_begin();
  pd_tensor *x, *label;
  dataset_tensors(&x, &label);
  int rc = dist_model_eager_steps(rank, &m->base, loss_fn, opt, x, label, B, STEPS, r->loss);
  pd_scope_end();
  pd_tensor_copy_to(m->w, r->w, IN * H, PD_FLOAT32);
  pd_optimizer_release(opt);
  pd_layer_release(loss_fn);
  pd_layer_release(&m->base);
  return rc;
}

/* The op (" name(") in prog with this rank's shard shape [2, cols] in its
 * attributes, where the global one is [4, cols]. */
static int check_shape(int rank, const char *prog, const char *op, int cols) {
  const char *at = strstr(prog, op);
  const char *eol = at ? strchr(at, '\n') : NULL;
  char local[32], global[32];
  snprintf(local, sizeof local, "[%d, %d]", B / 2, cols);
  snprintf(global, sizeof global, "[%d, %d]", B, cols);
  if (!at) {
    fprintf(stderr, "rank %d: no%s) in the partitioned Program:\n%s\n", rank, op, prog);
    return 31;
  }
  size_t n = eol ? (size_t)(eol - at) : strlen(at);
  char line[512];
  snprintf(line, sizeof line, "%.*s", (int)(n < sizeof line ? n : sizeof line - 1), at);
  if (!strstr(line, local) || strstr(line, global)) {
    fprintf(stderr, "rank %d: %s has not the shard's shape %s: %s\n", rank, op, local, line);
    return 32;
  }
  return 0;
}

static int run_dist(int rank, result *r) {
  pd_dist_process_mesh *mesh =
      pd_dist_process_mesh_new(1, (const int64_t[]){2}, (const int[]){0, 1}, (const char *[]){"dp"});
  net *m = net_new();
  pd_layer *loss_fn = pd_layer_new(sizeof(pd_layer), &k_loss_type);
  DIST_CHECK(mesh && m && loss_fn, 11);
  pd_optimizer *opt = pd_optimizer_sgd(0.05, &m->w, 1, NULL);
  pd_scope_begin();
  pd_tensor *t[2];
  dataset_tensors(&t[0], &t[1]);
  pd_io_dataset *ds = pd_io_tensor_dataset(t, 2);
  pd_scope_end();
  pd_dist_shard_dataloader *sl = pd_dist_shard_dataloader_new(
      ds, &(pd_io_data_loader_opts){.batch_size = B},
      &(pd_dist_shard_dataloader_opts){.meshes = &mesh, .n_meshes = 1, .shard_dim = "dp"});
  pd_dist_model *dm = NULL;
  pd_dist_data_loader *dl = NULL;
  DIST_CHECK(opt && sl && pd_dist_to_static(&m->base, NULL, sl, loss_fn, opt, NULL, &dm, &dl) == PD_OK, 12);
  int rc = dist_model_run_steps(rank, dm, dl, STEPS, r->loss);
  if (rc == 0) {
    pd_scope_begin();
    pd_tensor *w = pd_dist_is_dist(m->w) ? pd_dist_unshard_dtensor(m->w) : m->w;
    if (w)
      pd_tensor_copy_to(w, r->w, IN * H, PD_FLOAT32);
    else
      rc = 15;
    pd_scope_end();
  }
  char *prog = pd_program_to_string(pd_dist_model_main_program(dm, PD_DIST_MODE_TRAIN, false));
  if (rc == 0 && !prog) rc = 16;
  if (rc == 0 && (g_which == NLL_SUM || g_which == NLL_NONE))
    rc = check_shape(rank, prog, " nll_loss_grad(", H);
  if (rc == 0 && g_which == NLL_MEAN) rc = check_shape(rank, prog, " c_nll_loss_grad(", H);
  if (rc == 0 && g_which == NLL_MEAN &&
      (test_count_of(prog, " c_nll_loss(") != 1 || strstr(prog, " nll_loss(") ||
       strstr(prog, "c_allgather"))) {
    fprintf(stderr, "rank %d: nll_loss's mean is not one c_nll_loss on the shard:\n%s\n", rank, prog);
    rc = 33;
  }
  if (rc == 0 && g_which == SLICE) rc = check_shape(rank, prog, " slice_grad(", H);
  if (rc == 0 && g_which == TOPK) rc = check_shape(rank, prog, " scatter_along(", H);
  free(prog);
  pd_dist_model_release(dm);
  pd_dist_data_loader_release(dl);
  pd_dist_shard_dataloader_release(sl);
  pd_io_dataset_release(ds);
  pd_optimizer_release(opt);
  pd_layer_release(loss_fn);
  pd_layer_release(&m->base);
  pd_dist_process_mesh_release(mesh);
  return rc;
}

static int rank_run(int rank) {
  result eager, dist;
  int rc = run_eager(rank, &eager);
  if (rc == 0) rc = run_dist(rank, &dist);
  return rc ? rc : dist_model_compare_runs(rank, dist.loss, eager.loss, STEPS, dist.w, eager.w, IN * H);
}

static void run_case(which w) {
  g_which = w; /* the forked ranks inherit it */
  dist_run_ranks_or_fail(2, rank_run, 120);
}

static void test_nll_loss_sum_grad_on_a_batch_shard(void **state) {
  (void)state;
  run_case(NLL_SUM);
}

static void test_nll_loss_none_grad_on_a_batch_shard(void **state) {
  (void)state;
  run_case(NLL_NONE);
}

static void test_nll_loss_mean_on_a_batch_shard(void **state) {
  (void)state;
  run_case(NLL_MEAN);
}

static void test_slice_grad_on_a_batch_shard(void **state) {
  (void)state;
  run_case(SLICE);
}

static void test_topk_scatter_along_on_a_batch_shard(void **state) {
  (void)state;
  run_case(TOPK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_nll_loss_sum_grad_on_a_batch_shard),
      cmocka_unit_test(test_nll_loss_none_grad_on_a_batch_shard),
      cmocka_unit_test(test_nll_loss_mean_on_a_batch_shard),
      cmocka_unit_test(test_slice_grad_on_a_batch_shard),
      cmocka_unit_test(test_topk_scatter_along_on_a_batch_shard),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
