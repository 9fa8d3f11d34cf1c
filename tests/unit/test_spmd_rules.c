/* Every op with an SPMD rule (its row's or its family's), checked from the
 * registry: on 2 processes (a 1-d mesh) and on 4 (a 2x2 mesh), each
 * sample's inputs are sharded in every legal way one input at a time (the
 * others replicated), and all at once on their first dims; the op on the
 * DTensors, unsharded, equals the op on the dense inputs (float64 to 1e-12,
 * other dtypes exactly), and so do the gradients of the float64 inputs.
 * A row with a rule and no sample fails the test. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/tensor_impl.h"
#include "dist_ranks.h"
#include "distributed/auto_parallel/ap_internal.h"
#include "op_samples.h"
#include "test_util.h"

static void run_ranks(int n, int (*fn)(int rank)) { dist_run_ranks_or_fail(n, fn, 280); }

/* Runs inside a scope: what it makes is released when the scope ends. */
static bool close_values(pd_tensor *a, pd_tensor *b) {
  if (!a || !b || a->ndim != b->ndim || !pd_shape_eq(a->ndim, a->shape, b->shape) || a->dtype != b->dtype)
    return false;
  pd_tensor *ca = pd_contiguous(pd_cast(a, PD_FLOAT64)), *cb = pd_contiguous(pd_cast(b, PD_FLOAT64));
  if (!ca || !cb) return false;
  double tol = a->dtype == PD_FLOAT64 ? 1e-12 : a->dtype == PD_FLOAT32 ? 1e-6 : 0;
  const double *x = pd_tensor_data(ca), *y = pd_tensor_data(cb);
  for (int64_t i = 0; i < ca->numel; i++) {
    if (isnan(x[i]) && isnan(y[i])) continue;
    if (x[i] == y[i]) continue; /* infinities */
    if (!(fabs(x[i] - y[i]) <= tol * (1 + fabs(y[i])))) return false;
  }
  return true;
}

static bool has_rule(pd_op_id id) { return pd_ap_rule_of(id) != NULL; }

/* ---- samples of rows with a rule that the family tables leave out ------ */
static pd_tensor *bools(int64_t r, int64_t c) {
  return pd_greater_than(sample_uniform(2, SHAPE(r, c), 0, 2), pd_full(0, NULL, 1.0, PD_FLOAT64));
}
static int s_compare(pd_tensor **in, pd_attrs *a) {
  (void)a;
  in[0] = sample_uniform(2, SHAPE(4, 3), 0, 1);
  in[1] = sample_uniform(1, SHAPE(3), 0, 1);
  return 2;
}
static int s_logical(pd_tensor **in, pd_attrs *a) {
  (void)a;
  in[0] = bools(4, 3);
  in[1] = bools(4, 3);
  return 2;
}
static int s_floor_divide(pd_tensor **in, pd_attrs *a) {
  (void)a;
  in[0] = sample_indices(2, SHAPE(4, 3), 50);
  in[1] = pd_add(sample_indices(2, SHAPE(4, 3), 6), pd_full(0, NULL, 1.0, PD_INT64));
  return 2;
}
static int s_all_any(pd_tensor **in, pd_attrs *a) {
  in[0] = bools(4, 3);
  sample_set_list(a, 0, 1, SHAPE(0));
  return 1;
}
static int s_unary_inplace(pd_tensor **in, pd_attrs *a) {
  (void)a;
  in[0] = sample_uniform(2, SHAPE(4, 3), 0.5, 2);
  return 1;
}
static int s_clip_inplace(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, SHAPE(4, 3), -2, 2);
  a->f[0] = -0.5;
  a->f[1] = 0.7;
  return 1;
}
static int s_reshape_inplace(pd_tensor **in, pd_attrs *a) {
  /* splits a dim: every shard carries over, as inplace needs */
  in[0] = sample_uniform(2, SHAPE(4, 6), -1, 1);
  sample_set_list(a, 0, 3, SHAPE(4, 2, 3));
  return 1;
}
static int s_squeeze_inplace(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(3, SHAPE(4, 1, 3), -1, 1);
  sample_set_list(a, 0, 1, SHAPE(1));
  return 1;
}
static int s_unsqueeze_inplace(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, SHAPE(4, 3), -1, 1);
  sample_set_list(a, 0, 1, SHAPE(1));
  return 1;
}
/* param, grad, learning rate, n_acc accumulators like param, n_pow powers */
static int optim_inputs(pd_tensor **in, pd_attrs *a, int n_acc, int n_pow) {
  int n = 0;
  in[n++] = sample_uniform(2, SHAPE(4, 3), -1, 1);
  in[n++] = sample_uniform(2, SHAPE(4, 3), -1, 1);
  in[n++] = pd_full(1, SHAPE(1), 0.1, PD_FLOAT64);
  for (int k = 0; k < n_acc; k++) in[n++] = sample_uniform(2, SHAPE(4, 3), 0.1, 0.5);
  for (int k = 0; k < n_pow; k++) in[n++] = pd_full(1, SHAPE(1), 0.9, PD_FLOAT64);
  a->f[0] = 0.9;
  a->f[1] = 0.999;
  a->f[2] = 1e-8;
  return n;
}
#define OPTIM_SAMPLE(NAME, ACC, POW) \
  static int s_##NAME(pd_tensor **in, pd_attrs *a) { return optim_inputs(in, a, ACC, POW); }
OPTIM_SAMPLE(sgd, 0, 0)
OPTIM_SAMPLE(momentum, 1, 0)
OPTIM_SAMPLE(adam, 2, 2)
OPTIM_SAMPLE(adamax, 2, 1)
OPTIM_SAMPLE(adagrad, 1, 0)
OPTIM_SAMPLE(adadelta, 2, 0)
OPTIM_SAMPLE(rmsprop, 3, 0)
static int s_lamb(pd_tensor **in, pd_attrs *a) {
  int n = optim_inputs(in, a, 2, 2);
  a->f[3] = 0.01; /* weight decay: the trust ratio applies */
  return n;
}

/* rows drawn at their global index: enough rows and categories that a
 * shard drawing another row's numbers shows */
static int s_multinomial_rows(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, SHAPE(5, 6), 0.1, 1);
  a->i[0] = 4;
  a->i[1] = 1;
  return 1;
}
static int s_multinomial_no_replacement(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, SHAPE(5, 6), 0.1, 1);
  a->i[0] = 4;
  a->i[1] = 0;
  return 1;
}

/* scatter_ with duplicates: the last one wins, and a row shard holding
 * only some of them must write the same one */
static int s_scatter_inplace(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, SHAPE(5, 4), -1, 1);
  in[1] = pd_tensor_from_f64((const double[]){3, 0, 3, 4, 1}, PD_INT64, 1, SHAPE(5));
  in[2] = sample_uniform(2, SHAPE(5, 4), -1, 1);
  a->i[0] = 1;
  return 3;
}
static int s_scatter_inplace_add(pd_tensor **in, pd_attrs *a) {
  int n = s_scatter_inplace(in, a);
  a->i[0] = 0;
  return n;
}

static const pd_op_sample k_extra[] = {
    {"equal", s_compare, 0},
    {"not_equal", s_compare, 0},
    {"less_than", s_compare, 0},
    {"less_equal", s_compare, 0},
    {"greater_than", s_compare, 0},
    {"greater_equal", s_compare, 0},
    {"logical_and", s_logical, 0},
    {"logical_or", s_logical, 0},
    {"logical_xor", s_logical, 0},
    {"floor_divide", s_floor_divide, 0},
    {"all", s_all_any, 0},
    {"any", s_all_any, 0},
    {"exp_", s_unary_inplace, 0},
    {"sqrt_", s_unary_inplace, 0},
    {"rsqrt_", s_unary_inplace, 0},
    {"reciprocal_", s_unary_inplace, 0},
    {"tanh_", s_unary_inplace, 0},
    {"floor_", s_unary_inplace, 0},
    {"clip_", s_clip_inplace, 0},
    {"reshape_", s_reshape_inplace, 0},
    {"squeeze_", s_squeeze_inplace, 0},
    {"unsqueeze_", s_unsqueeze_inplace, 0},
    {"ceil_", s_unary_inplace, 0},
    {"relu_", s_unary_inplace, 0},
    {"sgd_", s_sgd, 0},
    {"momentum_", s_momentum, 0},
    {"adam_", s_adam, 0},
    {"adamw_", s_adam, 0},
    {"adamax_", s_adamax, 0},
    {"adagrad_", s_adagrad, 0},
    {"adadelta_", s_adadelta, 0},
    {"rmsprop_", s_rmsprop, 0},
    {"lamb_", s_lamb, 0},
    {"multinomial", s_multinomial_rows, 0},
    {"multinomial", s_multinomial_no_replacement, 0},
    {"scatter_", s_scatter_inplace, 0},
    {"scatter_", s_scatter_inplace_add, 0},
    {"scatter", s_scatter_inplace, 0},
    {"scatter", s_scatter_inplace_add, 0},
    {NULL, NULL, 0},
};
static const pd_op_sample *const k_tables_extra[] = {k_extra, NULL};

/* The outputs of op id on in (fresh copies, as inplace ops write input 0)
 * and, with grads, the gradients of sum(out_k * w_k) for the float64
 * inputs (NULL where none). Returns the number of outputs, -1 on error. */
static int run_op(pd_op_id id, pd_tensor **in, int n_in, const pd_attrs *a, pd_tensor **out, pd_tensor **w,
                  pd_tensor **grads) {
  const pd_op_def *def = pd_op_table[id];
  /* a random op draws the same numbers in every run (and on every rank) */
  if (def->flags & PD_OPF_RANDOM) pd_seed(2024);
  bool diff = (def->flags & PD_OPF_DIFF) && !(def->flags & PD_OPF_INPLACE) && grads;
  for (int i = 0; i < n_in; i++)
    if (diff && pd_tensor_dtype(in[i]) == PD_FLOAT64) pd_tensor_set_stop_gradient(in[i], false);
  int n_out = 0;
  if (pd_dispatch(id, in, n_in, a, out, &n_out) != PD_OK) return -1;
  if (!diff) return n_out;
  pd_tensor *loss = NULL;
  for (int k = 0; k < n_out; k++) {
    if (pd_tensor_dtype(out[k]) != PD_FLOAT64 || (def->nondiff_out >> k & 1)) continue;
    pd_tensor *t = pd_sum(pd_multiply(out[k], w[k]), NULL, 0, false);
    loss = loss ? pd_add(loss, t) : t;
  }
  if (!loss) return n_out;
  pd_tensor *xs[PD_MAX_OUTPUTS];
  int nx = 0, at[PD_MAX_OUTPUTS];
  for (int i = 0; i < n_in; i++)
    if (pd_tensor_dtype(in[i]) == PD_FLOAT64) {
      at[nx] = i;
      xs[nx++] = in[i];
    }
  pd_tensor *g[PD_MAX_OUTPUTS] = {0};
  if (pd_grad(&loss, 1, xs, nx, NULL, &(pd_grad_opts){.allow_unused = true}, g) != PD_OK) return -1;
  for (int j = 0; j < nx; j++) grads[at[j]] = g[j]; /* pd_grad put them in the scope */
  return n_out;
}

/* One placement configuration: per input its placements on the mesh. */
static int check_config(int rank, pd_dist_process_mesh *m, pd_op_id id, const pd_op_sample *s,
                        const pd_dist_placement (*pl)[PD_DIST_MAX_MESH_DIMS], const char *what) {
  int nd = pd_dist_process_mesh_ndim(m), bad = 0;
  pd_scope_begin();
  pd_tensor *in[PD_MAX_OUTPUTS] = {0}, *din[PD_MAX_OUTPUTS] = {0};
  pd_attrs a;
  memset(&a, 0, sizeof a);
  sample_reseed(11);
  int n_in = s->make(in, &a);
  pd_tensor *ref[PD_MAX_OUTPUTS] = {0}, *got[PD_MAX_OUTPUTS] = {0}, *w[PD_MAX_OUTPUTS] = {0};
  pd_tensor *gref[PD_MAX_OUTPUTS] = {0}, *ggot[PD_MAX_OUTPUTS] = {0};
  pd_tensor *ref_in[PD_MAX_OUTPUTS];
  for (int i = 0; i < n_in; i++) ref_in[i] = pd_clone(in[i], pd_tensor_dtype(in[i]));
  /* the dense run, then weights for the loss of its outputs */
  int n_ref = run_op(id, ref_in, n_in, &a, ref, w, NULL);
  for (int k = 0; k < n_ref; k++)
    w[k] = sample_uniform(pd_tensor_ndim(ref[k]), pd_tensor_shape(ref[k]), 0.5, 1.5);
  for (int i = 0; i < n_in; i++) ref_in[i] = pd_clone(in[i], pd_tensor_dtype(in[i]));
  n_ref = run_op(id, ref_in, n_in, &a, ref, w, gref);
  if (n_ref < 0) { /* the sample is for errors or the op refuses it densely: nothing to compare */
    pd_clear_error();
    pd_scope_end();
    return 0;
  }
  for (int i = 0; i < n_in; i++)
    din[i] = pd_dist_shard_tensor(pd_clone(in[i], pd_tensor_dtype(in[i])), m, pl[i], nd);
  int n_got = run_op(id, din, n_in, &a, got, w, ggot);
  if (n_got != n_ref) {
    fprintf(stderr, "rank %d: %s (%s): %d outputs sharded, %d dense (%s)\n", rank, s->op, what, n_got, n_ref,
            pd_last_error());
    bad = 1;
  }
  /* every rank unshards everything (collectives), whatever it found */
  for (int k = 0; n_got == n_ref && k < n_ref; k++) {
    pd_tensor *u = pd_dist_unshard_dtensor(got[k]);
    if (!close_values(u, ref[k])) {
      fprintf(stderr, "rank %d: %s (%s): output %d differs\n", rank, s->op, what, k);
      if (u)
        pd_tensor_print(u, stderr);
      else
        fprintf(stderr, "  %s\n", pd_last_error());
      pd_tensor_print(ref[k], stderr);
      bad = 1;
    }
  }
  for (int i = 0; n_got == n_ref && i < n_in; i++) {
    pd_tensor *u = gref[i] ? pd_dist_unshard_dtensor(ggot[i]) : NULL;
    if (gref[i] && !close_values(u, gref[i])) {
      fprintf(stderr, "rank %d: %s (%s): gradient of input %d differs (%s)\n", rank, s->op, what, i,
              ggot[i] ? "values" : pd_last_error());
      if (u)
        pd_tensor_print(u, stderr);
      else
        fprintf(stderr, "  %s\n", pd_last_error());
      pd_tensor_print(gref[i], stderr);
      bad = 1;
    }
  }
  pd_clear_error();
  pd_scope_end();
  return bad;
}

/* Every legal placement of one input (the others replicated), and all
 * inputs sharded on their dim 0 by mesh axis 0. */
static int check_sample(int rank, pd_dist_process_mesh *m, pd_op_id id, const pd_op_sample *s) {
  int nd = pd_dist_process_mesh_ndim(m), bad = 0;
  pd_scope_begin();
  pd_tensor *in[PD_MAX_OUTPUTS] = {0};
  pd_attrs a;
  memset(&a, 0, sizeof a);
  sample_reseed(11);
  int n_in = s->make(in, &a);
  int64_t shapes[PD_MAX_OUTPUTS][PD_MAX_DIMS];
  int ndims[PD_MAX_OUTPUTS];
  for (int i = 0; i < n_in; i++) {
    ndims[i] = pd_tensor_ndim(in[i]);
    memcpy(shapes[i], pd_tensor_shape(in[i]), sizeof(int64_t) * (size_t)ndims[i]);
  }
  pd_scope_end();
  pd_clear_error();
  if (n_in <= 0) return 0;
  pd_dist_placement pl[PD_MAX_OUTPUTS][PD_DIST_MAX_MESH_DIMS];
  char what[64];
  for (int i = 0; i < n_in; i++)
    for (int d = 0; d < ndims[i]; d++)
      for (int ax = 0; ax < nd; ax++) {
        if (shapes[i][d] < 2) continue;
        for (int j = 0; j < n_in; j++)
          for (int b = 0; b < nd; b++) pl[j][b] = pd_dist_replicate();
        pl[i][ax] = pd_dist_shard(d);
        snprintf(what, sizeof what, "input %d Shard(%d) on mesh axis %d", i, d, ax);
        bad |= check_config(rank, m, id, s, (const pd_dist_placement(*)[PD_DIST_MAX_MESH_DIMS])pl, what);
      }
  for (int j = 0; j < n_in; j++)
    for (int b = 0; b < nd; b++)
      pl[j][b] = b == 0 && ndims[j] > 0 && shapes[j][0] >= 2 ? pd_dist_shard(0) : pd_dist_replicate();
  bad |= check_config(rank, m, id, s, (const pd_dist_placement(*)[PD_DIST_MAX_MESH_DIMS])pl, "all Shard(0)");
  return bad;
}

static int check_all(int rank, pd_dist_process_mesh *m) {
  int bad = 0, covered = 0;
  for (int id = 0; id < PD_NUM_OPS; id++) {
    if (!has_rule((pd_op_id)id)) continue;
    const pd_op_def *def = pd_op_table[id];
    int found = 0;
    for (int set = 0; set < 2; set++) {
      const pd_op_sample *const *tables = set == 0 ? pd_sample_tables : k_tables_extra;
      for (size_t t = 0; tables[t]; t++)
        for (const pd_op_sample *s = tables[t]; s->op; s++)
          if (strcmp(s->op, def->name) == 0) {
            found++;
            bad |= check_sample(rank, m, (pd_op_id)id, s);
          }
    }
    covered += found > 0;
    if (!found && rank == 0) fprintf(stderr, "spmd: %s has a rule but no sample\n", def->name);
    if (!found) bad = 1;
  }
  if (rank == 0) printf("spmd: %d ops with a rule checked sharded against dense\n", covered);
  pd_dist_process_mesh_release(m);
  return bad;
}

static int rank_1d(int rank) {
  return check_all(rank, pd_dist_process_mesh_new(1, SHAPE(2), (const int[]){0, 1}, NULL));
}

static int rank_2d(int rank) {
  return check_all(rank, pd_dist_process_mesh_new(2, SHAPE(2, 2), (const int[]){0, 1, 2, 3}, NULL));
}

static void test_rules_two_processes(void **state) {
  (void)state;
  run_ranks(2, rank_1d);
}

static void test_rules_four_processes(void **state) {
  (void)state;
  run_ranks(4, rank_2d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rules_two_processes),
      cmocka_unit_test(test_rules_four_processes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
