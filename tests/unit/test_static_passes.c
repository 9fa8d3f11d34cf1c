/* The Executor's compile passes (src/static/passes.h): each pass, alone,
 * leaves a plan with fewer ops whose outputs and gradients equal the plan
 * without passes (float64, to 1e-10; the fusions that run the same kernels
 * give the same bits). Then CompiledProgram / BuildStrategy /
 * ExecutionStrategy switching them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "paddlec/static.h"
#include "static/passes.h"
#include "static/static_internal.h"
#include "test_util.h"

static const pd_pass_options no_passes = {0};

/* A recorded float64 model: the Program, its startup, the fetches (outputs
 * first, then gradients) and the feeds. */
typedef struct model {
  pd_program *main, *startup;
  pd_tensor *fetch[8];
  int n_fetch;
  pd_tensor *feed_value[2];
  const char *feed_name[2];
  int n_feed;
  pd_layer *layers[4];
  pd_tensor *keep[24]; /* handles to release */
  int n_keep;
} model;

static pd_tensor *keep(model *m, pd_tensor *t) {
  assert_non_null(t);
  m->keep[m->n_keep++] = t;
  return t;
}

static void model_free(model *m) {
  for (int i = 0; i < m->n_keep; i++) pd_tensor_release(m->keep[i]);
  for (int i = 0; i < m->n_fetch; i++) pd_tensor_release(m->fetch[i]);
  for (int i = 0; i < m->n_feed; i++) pd_tensor_release(m->feed_value[i]);
  for (int i = 0; i < 4; i++) pd_layer_release(m->layers[i]);
  pd_program_release(m->main);
  pd_program_release(m->startup);
}

/* x -> Linear(16, 300) -> relu -> Linear(300, 300) -> sigmoid -> Linear(300, 4)
 * -> mean of squares; fetches the loss, the hidden output and the
 * parameters' gradients. */
static void build_mlp(model *m) {
  memset(m, 0, sizeof *m);
  pd_set_default_dtype(PD_FLOAT64);
  m->layers[0] = pd_nn_linear(16, 300, NULL);
  m->layers[1] = pd_nn_linear(300, 300, NULL);
  m->layers[2] = pd_nn_linear(300, 4, NULL);
  pd_set_default_dtype(PD_FLOAT32);
  m->main = pd_static_program(), m->startup = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(m->main, m->startup), PD_OK);
  pd_tensor *x = keep(m, pd_static_data("x", 2, SHAPE(-1, 16), PD_FLOAT64));
  pd_tensor *h = keep(m, pd_relu(keep(m, pd_layer_call1(m->layers[0], x))));
  pd_tensor *g = keep(m, pd_sigmoid(keep(m, pd_layer_call1(m->layers[1], h))));
  pd_tensor *o = keep(m, pd_layer_call1(m->layers[2], g));
  pd_tensor *loss = keep(m, pd_mean(keep(m, pd_square(o)), NULL, 0, false));
  pd_named_tensors ps = {0};
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  pd_tensor *params[6];
  int np = 0;
  for (int l = 0; l < 3; l++) {
    assert_int_equal(pd_layer_parameters(m->layers[l], &ps), PD_OK);
    for (int i = 0; i < ps.n; i++) params[np++] = ps.tensors[i];
    pd_named_tensors_free(&ps);
  }
  assert_int_equal(pd_static_program_guard_begin(m->main, m->startup), PD_OK);
  pd_tensor *grads[6];
  assert_int_equal(pd_static_gradients(&loss, 1, params, np, NULL, NULL, 0, grads), PD_OK);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  m->fetch[m->n_fetch++] = pd_tensor_retain(loss);
  m->fetch[m->n_fetch++] = pd_tensor_retain(g);
  assert_int_equal(np, 6);
  for (int i = 0; i < np; i++) m->fetch[m->n_fetch++] = grads[i]; /* 8 in all */
  m->feed_name[0] = "x", m->feed_value[0] = test_wave(8, 16, 1), m->n_feed = 1;
}

/* Runs m with passes o (NULL: all) and returns the fetches and the stats
 * of the plan. */
static void run_model(model *m, const pd_pass_options *o, pd_tensor **got, pd_pass_stats *stats,
                      size_t *arena) {
  pd_executor *e = pd_static_executor(PD_CPU);
  pd_var_scope *scope = pd_static_scope();
  pd_executor_set_passes(e, o);
  assert_int_equal(pd_executor_run(e, m->startup, NULL, 0, NULL, 0, NULL, scope), PD_OK);
  pd_static_feed feed[2];
  for (int i = 0; i < m->n_feed; i++) feed[i] = (pd_static_feed){m->feed_name[i], m->feed_value[i]};
  pd_seed(11); /* models with dropout draw the same masks in every run */
  if (pd_executor_run(e, m->main, feed, m->n_feed, m->fetch, m->n_fetch, got, scope) != PD_OK)
    fail_msg("run: %s", pd_last_error());
  const pd_pass_stats *s = pd_executor_pass_stats(e);
  assert_non_null(s);
  *stats = *s;
  double compile_s = pd_executor_compile_seconds(e); /* timed once, when it lowered */
  assert_true(compile_s > 0 && compile_s < 10);
  pd_tensor *again[8];
  assert_int_equal(pd_executor_run(e, m->main, feed, m->n_feed, m->fetch, m->n_fetch, again, scope), PD_OK);
  assert_true(pd_executor_compile_seconds(e) == compile_s);
  for (int i = 0; i < m->n_fetch; i++) pd_tensor_release(again[i]);
  if (arena) *arena = pd_executor_arena_bytes(e);
  pd_var_scope_release(scope);
  pd_executor_release(e);
}

/* The model with passes o against no passes: equal fetches (to tol; 0:
 * the same bits), and the plan's stats. */
static pd_pass_stats check_pass(model *m, pd_pass_options o, double tol) {
  pd_tensor *ref[8], *got[8];
  pd_pass_stats s0, s1;
  run_model(m, &no_passes, ref, &s0, NULL);
  run_model(m, &o, got, &s1, NULL);
  assert_int_equal(s0.ops_before, s0.ops_after); /* no pass, no change */
  for (int i = 0; i < m->n_fetch; i++) {
    if (tol == 0)
      assert_memory_equal(pd_tensor_data(ref[i]), pd_tensor_data(got[i]), (size_t)ref[i]->numel * 8);
    else
      expect_close(got[i], ref[i], tol, tol);
    pd_tensor_release(ref[i]), pd_tensor_release(got[i]);
  }
  assert_int_equal(s1.ops_before, s0.ops_before);
  return s1;
}

static void test_fold_constants(void **state) {
  (void)state;
  model m;
  build_mlp(&m);
  pd_pass_stats s = check_pass(&m, (pd_pass_options){.fold_constants = true}, 0);
  /* mean's backward: full, reshape, expand, scale; relu's: the zero fills */
  assert_true(s.folded >= 4);
  assert_int_equal(s.ops_after, s.ops_before); /* replaced, not removed */
  model_free(&m);
}

static void test_remove_dead_ops(void **state) {
  (void)state;
  model m;
  build_mlp(&m);
  /* folding leaves the constants' producers unread: dead code removal
   * drops them */
  pd_pass_stats f = check_pass(&m, (pd_pass_options){.fold_constants = true}, 0);
  pd_pass_stats s = check_pass(&m, (pd_pass_options){.fold_constants = true, .remove_dead_ops = true}, 0);
  assert_true(s.removed >= 3);
  assert_int_equal(s.ops_after, f.ops_after - s.removed);
  model_free(&m);
}

static void test_fuse_gemm_epilogue(void **state) {
  (void)state;
  model m;
  build_mlp(&m);
  pd_pass_stats s = check_pass(&m, (pd_pass_options){.fuse_gemm_epilogue = true}, 0);
  /* three matmul + add, two of them with an activation */
  assert_int_equal(s.gemm_epilogues, 3);
  assert_int_equal(s.ops_after, s.ops_before - 5);
  model_free(&m);
}

/* x -> Linear(300, 300) -> h; d1 = dropout(h), d2 = dropout(h),
 * a1 = d1 + x, a2 = a1 + d2 (the dropouts' results read by the adds only)
 * -> mean of squares; fetches the loss, a2 and the Linear's gradients. */
static void build_dropout_adds(model *m) {
  memset(m, 0, sizeof *m);
  pd_set_default_dtype(PD_FLOAT64);
  m->layers[0] = pd_nn_linear(300, 300, NULL);
  pd_set_default_dtype(PD_FLOAT32);
  m->main = pd_static_program(), m->startup = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(m->main, m->startup), PD_OK);
  pd_tensor *x = keep(m, pd_static_data("x", 2, SHAPE(-1, 300), PD_FLOAT64));
  pd_tensor *h = keep(m, pd_layer_call1(m->layers[0], x));
  pd_tensor *d1 = keep(m, pd_dropout(h, 0.3, 0, NULL, true, NULL));
  pd_tensor *d2 = keep(m, pd_dropout(h, 0.6, 0, NULL, true, NULL));
  pd_tensor *a2 = keep(m, pd_add(keep(m, pd_add(d1, x)), d2));
  pd_tensor *loss = keep(m, pd_mean(keep(m, pd_square(a2)), NULL, 0, false));
  pd_named_tensors ps = {0};
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  assert_int_equal(pd_layer_parameters(m->layers[0], &ps), PD_OK);
  assert_int_equal(pd_static_program_guard_begin(m->main, m->startup), PD_OK);
  pd_tensor *grads[2];
  assert_int_equal(pd_static_gradients(&loss, 1, ps.tensors, 2, NULL, NULL, 0, grads), PD_OK);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  pd_named_tensors_free(&ps);
  m->fetch[m->n_fetch++] = pd_tensor_retain(loss);
  m->fetch[m->n_fetch++] = pd_tensor_retain(a2);
  for (int i = 0; i < 2; i++) m->fetch[m->n_fetch++] = grads[i];
  m->feed_name[0] = "x", m->feed_value[0] = test_wave(8, 300, 1), m->n_feed = 1;
}

/* The second dropout and its add fuse; the first pair does not, since
 * the second dropout draws between them (moving the first dropout to its
 * add would swap the two masks). The same bits either way. */
static void test_fuse_dropout_add(void **state) {
  (void)state;
  model m;
  build_dropout_adds(&m);
  pd_pass_stats s = check_pass(&m, (pd_pass_options){.fuse_dropout_add = true}, 0);
  assert_int_equal(s.dropout_adds, 1);
  assert_int_equal(s.ops_after, s.ops_before - 1);
  model_free(&m);
}

/* A dropout of a shard (a distributed Program's: it draws at the global
 * indices its global_shape and offset give) keeps the plain op. */
static void test_no_fusion_of_a_shard_dropout(void **state) {
  (void)state;
  model m;
  build_dropout_adds(&m);
  pd_static_block *b = m.main->blocks[0];
  for (int k = 0; k < b->n_ops; k++)
    if (strcmp(b->ops[k]->type, "dropout") == 0) { /* the whole [8, 300] as a shard of itself */
      pd_attrs *a = &b->ops[k]->attrs;
      a->nv[1] = a->nv[2] = 2;
      a->v[1][0] = 8, a->v[1][1] = 300, a->v[2][0] = a->v[2][1] = 0;
    }
  pd_pass_stats s = check_pass(&m, (pd_pass_options){.fuse_dropout_add = true}, 0);
  assert_int_equal(s.dropout_adds, 0);
  model_free(&m);
}

static void test_fuse_elementwise(void **state) {
  (void)state;
  model m;
  build_mlp(&m);
  pd_pass_stats s = check_pass(&m, (pd_pass_options){.fuse_elementwise = true}, 0);
  assert_true(s.elementwise_chains >= 2);
  assert_true(s.ops_after < s.ops_before);
  model_free(&m);
}

/* A chain over a [6, 300] output reading a [6, 1] column, a [300] row and
 * a scalar (broadcast inputs), with its gradient: exp(x * c + b) - s. */
static void test_fuse_elementwise_broadcast(void **state) {
  (void)state;
  model m;
  memset(&m, 0, sizeof m);
  m.main = pd_static_program(), m.startup = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(m.main, m.startup), PD_OK);
  pd_tensor *x = keep(&m, pd_static_data("x", 2, SHAPE(-1, 300), PD_FLOAT64));
  pd_tensor *c = keep(&m, pd_static_data("c", 2, SHAPE(-1, 1), PD_FLOAT64));
  pd_tensor_set_stop_gradient(x, false);
  pd_tensor *b = keep(&m, test_wave(1, 300, 5)), *s = keep(&m, pd_full(0, NULL, 0.25, PD_FLOAT64));
  pd_tensor *b1 = keep(&m, pd_reshape(b, 1, SHAPE(300)));
  pd_tensor *y =
      keep(&m, pd_subtract(keep(&m, pd_exp(keep(&m, pd_add(keep(&m, pd_multiply(x, c)), b1)))), s));
  pd_tensor *loss = keep(&m, pd_sum(keep(&m, pd_multiply(y, y)), NULL, 0, false));
  pd_tensor *gx;
  assert_int_equal(pd_static_gradients(&loss, 1, &x, 1, NULL, NULL, 0, &gx), PD_OK);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  m.fetch[0] = pd_tensor_retain(y), m.fetch[1] = gx, m.n_fetch = 2;
  m.feed_name[0] = "x", m.feed_value[0] = test_wave(6, 300, 2);
  m.feed_name[1] = "c", m.feed_value[1] = test_wave(6, 1, 3);
  m.n_feed = 2;
  pd_pass_stats st = check_pass(&m, (pd_pass_options){.fuse_elementwise = true}, 0);
  assert_true(st.elementwise_chains >= 1);
  assert_true(st.ops_after <= st.ops_before - 3); /* multiply, add, exp, subtract: one op */
  model_free(&m);
}

/* Rotary embeddings (the rotate-half form pd_rotary_embedding records):
 * the forward's seven ops and the backward's nine become one op each, with
 * the same bits: y = rope(reshape(x W + b, [B, 3, 2, 8])) with tables of
 * [1, 3, 1, 8], the loss sum(y * y * t), fetching y and the gradients of
 * W, b and x. A rotation that is not the pattern's ([x1, -x2]) stays. */
static void test_fuse_rope(void **state) {
  (void)state;
  model m;
  memset(&m, 0, sizeof m);
  pd_set_default_dtype(PD_FLOAT64);
  m.layers[0] = pd_nn_linear(16, 16, NULL);
  pd_set_default_dtype(PD_FLOAT32);
  double cv[24], sv[24];
  for (int i = 0; i < 24; i++) cv[i] = cos(0.37 * i + 0.1), sv[i] = sin(0.37 * i + 0.1);
  pd_tensor *ct = keep(&m, pd_to_tensor(cv, PD_FLOAT64, 4, SHAPE(1, 3, 1, 8)));
  pd_tensor *st = keep(&m, pd_to_tensor(sv, PD_FLOAT64, 4, SHAPE(1, 3, 1, 8)));
  m.main = pd_static_program(), m.startup = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(m.main, m.startup), PD_OK);
  pd_tensor *x = keep(&m, pd_static_data("x", 2, SHAPE(-1, 16), PD_FLOAT64));
  pd_tensor_set_stop_gradient(x, false);
  pd_tensor *h = keep(&m, pd_reshape(keep(&m, pd_layer_call1(m.layers[0], x)), 4, SHAPE(-1, 3, 2, 8)));
  pd_tensor *y = keep(&m, pd_rotary_embedding(h, ct, st));
  /* not the pattern: concat(x1, -x2), on x itself */
  pd_tensor *xr = keep(&m, pd_reshape(x, 4, SHAPE(-1, 3, 2, 8)));
  pd_tensor *x1 = keep(&m, pd_slice(xr, 1, SHAPE(3), SHAPE(0), SHAPE(4)));
  pd_tensor *x2 = keep(&m, pd_slice(xr, 1, SHAPE(3), SHAPE(4), SHAPE(8)));
  pd_tensor *parts[2] = {x1, keep(&m, pd_neg(x2))};
  pd_tensor *z = keep(
      &m, pd_add(keep(&m, pd_multiply(xr, ct)), keep(&m, pd_multiply(keep(&m, pd_concat(parts, 2, 3)), st))));
  pd_tensor *t = keep(&m, test_wave(6, 8, 7));
  pd_tensor *t4 = keep(&m, pd_reshape(t, 4, SHAPE(2, 3, 1, 8)));
  pd_tensor *yy = keep(&m, pd_multiply(keep(&m, pd_multiply(y, y)), t4));
  pd_tensor *loss =
      keep(&m, pd_add(keep(&m, pd_sum(yy, NULL, 0, false)), keep(&m, pd_sum(z, NULL, 0, false))));
  pd_named_tensors ps = {0};
  assert_int_equal(pd_layer_parameters(m.layers[0], &ps), PD_OK);
  pd_tensor *wrt[3] = {ps.tensors[0], ps.tensors[1], x}, *grads[3];
  assert_int_equal(pd_static_gradients(&loss, 1, wrt, 3, NULL, NULL, 0, grads), PD_OK);
  pd_named_tensors_free(&ps);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  m.fetch[m.n_fetch++] = pd_tensor_retain(y);
  m.fetch[m.n_fetch++] = pd_tensor_retain(z);
  for (int i = 0; i < 3; i++) m.fetch[m.n_fetch++] = grads[i];
  m.feed_name[0] = "x", m.feed_value[0] = test_wave(6, 16, 1), m.n_feed = 1;
  pd_pass_stats s = check_pass(&m, (pd_pass_options){.fuse_elementwise = true}, 0);
  assert_int_equal(s.rope, 2); /* y's forward and backward; not z's */
  pd_pass_stats all = check_pass(&m, pd_pass_options_all(), 0);
  assert_int_equal(all.rope, 2);
  model_free(&m);
}

/* In-place reuse: the planner places outputs over dying inputs (on the
 * bench's models it shrinks the arena: the MLP's from 2.10 to 1.58 MB; on
 * this small one best fit may come out a little larger), and results are
 * equal. */
static void test_inplace(void **state) {
  (void)state;
  model m;
  build_mlp(&m);
  pd_tensor *a[8], *b[8];
  pd_pass_stats s1, s0;
  size_t with = 0, without = 0;
  run_model(&m, &(pd_pass_options){.inplace = true}, a, &s1, &with);
  run_model(&m, &no_passes, b, &s0, &without);
  assert_true(s1.inplace > 0);
  assert_int_equal(s0.inplace, 0);
  for (int i = 0; i < m.n_fetch; i++) {
    assert_memory_equal(pd_tensor_data(a[i]), pd_tensor_data(b[i]), (size_t)a[i]->numel * 8);
    pd_tensor_release(a[i]), pd_tensor_release(b[i]);
  }
  print_message("%d values in place; arena %zu bytes with in-place reuse, %zu without\n", s1.inplace, with,
                without);
  model_free(&m);
}

/* The softmax cross entropy's gradient written over its logits, which die
 * there (pass_inplace.c): Linear(16, 50) -> cross entropy with hard labels,
 * mean. The results are the same bits as without. */
static void test_inplace_cross_entropy_grad(void **state) {
  (void)state;
  model m;
  memset(&m, 0, sizeof m);
  pd_set_default_dtype(PD_FLOAT64);
  m.layers[0] = pd_nn_linear(16, 50, NULL);
  pd_set_default_dtype(PD_FLOAT32);
  m.main = pd_static_program(), m.startup = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(m.main, m.startup), PD_OK);
  pd_tensor *x = keep(&m, pd_static_data("x", 2, SHAPE(-1, 16), PD_FLOAT64));
  pd_tensor *label = keep(&m, pd_static_data("label", 2, SHAPE(-1, 1), PD_INT64));
  pd_tensor *logits = keep(&m, pd_layer_call1(m.layers[0], x));
  pd_tensor *loss =
      keep(&m, pd_cross_entropy(logits, label, NULL, -100, PD_REDUCTION_MEAN, false, -1, true, 0.0));
  pd_named_tensors ps = {0};
  assert_int_equal(pd_layer_parameters(m.layers[0], &ps), PD_OK);
  pd_tensor *wrt[2] = {ps.tensors[0], ps.tensors[1]}, *grads[2];
  assert_int_equal(pd_static_gradients(&loss, 1, wrt, 2, NULL, NULL, 0, grads), PD_OK);
  pd_named_tensors_free(&ps);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  m.fetch[m.n_fetch++] = pd_tensor_retain(loss);
  for (int i = 0; i < 2; i++) {
    if (!grads[i]) fail_msg("no gradient for input %d", i);
    m.fetch[m.n_fetch++] = grads[i];
  }
  m.feed_name[0] = "x", m.feed_value[0] = test_wave(8, 16, 1);
  int64_t lab[8] = {3, 0, 49, 7, 7, 21, 11, 40};
  m.feed_name[1] = "label", m.feed_value[1] = pd_to_tensor(lab, PD_INT64, 2, SHAPE(8, 1));
  m.n_feed = 2;
  pd_tensor *a[8], *b[8];
  pd_pass_stats s1, s0;
  run_model(&m, &(pd_pass_options){.inplace = true}, a, &s1, NULL);
  run_model(&m, &no_passes, b, &s0, NULL);
  assert_int_equal(s1.inplace,
                   2); /* the gradient over the logits, and one elementwise op (1 without the first) */
  assert_int_equal(s0.inplace, 0);
  for (int i = 0; i < m.n_fetch; i++) {
    assert_memory_equal(pd_tensor_data(a[i]), pd_tensor_data(b[i]), (size_t)a[i]->numel * 8);
    pd_tensor_release(a[i]), pd_tensor_release(b[i]);
  }
  model_free(&m);
}

/* The ops of e's lowered plan of type `type` writing a recomputed value. */
static int recomputed_ops(const pd_executor *e, const char *type) {
  const pd_static_block *b = pd_executor_lowered_program(e)->blocks[0];
  int n = 0;
  for (int k = 0; k < b->n_ops; k++)
    n += strcmp(b->ops[k]->type, type) == 0 && b->ops[k]->n_out == 1 &&
         strstr(b->ops[k]->outputs[0], "@RECOMPUTE") != NULL;
  return n;
}

/* Two SGD steps of m's program (the loss m->fetch[0]) with passes o; the
 * fetches of both steps (step * n_fetch + i), the parameters after, the
 * plan's stats and arena, and how many recomputed ops of type `type` its
 * plan has. */
static void train_two_steps(model *m, const pd_pass_options *o, pd_tensor **got, pd_tensor **params, int np,
                            pd_pass_stats *stats, size_t *arena, const char *type, int *n_type) {
  pd_executor *e = pd_static_executor(PD_CPU);
  pd_var_scope *scope = pd_static_scope();
  pd_executor_set_passes(e, o);
  assert_int_equal(pd_executor_run(e, m->startup, NULL, 0, NULL, 0, NULL, scope), PD_OK);
  pd_static_feed feed = {m->feed_name[0], m->feed_value[0]};
  for (int step = 0; step < 2; step++)
    if (pd_executor_run(e, m->main, &feed, 1, m->fetch, m->n_fetch, &got[step * m->n_fetch], scope) != PD_OK)
      fail_msg("run: %s", pd_last_error());
  for (int i = 0; i < np; i++)
    params[i] = pd_tensor_retain(pd_var_scope_find_var(scope, pd_tensor_name(m->keep[i])));
  *stats = *pd_executor_pass_stats(e);
  *arena = pd_executor_arena_bytes(e);
  *n_type = recomputed_ops(e, type);
  pd_var_scope_release(scope);
  pd_executor_release(e);
}

/* Recomputation (pass_recompute.c) on m, trained with SGD: the same bits
 * with and without it; returns the recomputed ops of type `type` and
 * checks the arena did not grow. */
static int check_recompute(model *m, int np, pd_pass_options o, const char *type) {
  pd_pass_options off = o;
  off.recompute = false;
  pd_tensor *la[16], *lb[16], *pa[8], *pb[8];
  pd_pass_stats sa, sb;
  size_t with, without;
  int n_type, n_off;
  train_two_steps(m, &o, la, pa, np, &sa, &with, type, &n_type);
  train_two_steps(m, &off, lb, pb, np, &sb, &without, type, &n_off);
  assert_int_equal(sb.recomputed, 0);
  assert_int_equal(n_off, 0);
  assert_int_equal(sa.ops_after, sb.ops_after + sa.recomputed);
  for (int i = 0; i < 2 * m->n_fetch; i++) {
    assert_memory_equal(pd_tensor_data(la[i]), pd_tensor_data(lb[i]), (size_t)la[i]->numel * 8);
    pd_tensor_release(la[i]), pd_tensor_release(lb[i]);
  }
  for (int i = 0; i < np; i++) {
    assert_memory_equal(pd_tensor_data(pa[i]), pd_tensor_data(pb[i]), (size_t)pa[i]->numel * 8);
    pd_tensor_release(pa[i]), pd_tensor_release(pb[i]);
  }
  assert_true(sa.recomputed > 0 ? with < without : with == without);
  print_message("%d values recomputed (%d %s); arena %zu bytes with, %zu without\n", sa.recomputed, n_type,
                type, with, without);
  return n_type;
}

/* The model's parameters first in m->keep (the caller's np of them), then
 * the loss minimized by SGD in m->fetch[0]. */
static int keep_params_then_minimize(model *m, pd_tensor *loss) {
  int np = 0;
  for (int l = 0; l < 4 && m->layers[l]; l++) {
    pd_named_tensors ps = {0};
    assert_int_equal(pd_layer_parameters(m->layers[l], &ps), PD_OK);
    for (int i = 0; i < ps.n; i++) {
      assert_true(m->n_keep < 24);
      memmove(m->keep + np + 1, m->keep + np, sizeof *m->keep * (size_t)(m->n_keep - np));
      m->keep[np++] = pd_tensor_retain(ps.tensors[i]), m->n_keep++;
    }
    pd_named_tensors_free(&ps);
  }
  pd_optimizer *sgd = pd_optimizer_sgd(0.1, NULL, 0, NULL);
  assert_int_equal(pd_optimizer_minimize(sgd, loss), PD_OK);
  pd_optimizer_release(sgd);
  m->fetch[m->n_fetch++] = pd_tensor_retain(loss);
  return np;
}

/* A decoder's MLP block and a wide head, x -> RMSNorm -> (Linear(16, 64),
 * Linear(16, 64)) -> swiglu -> Linear(64, 256) -> mean of squares, batch
 * 64: the plan's live peak is the head's output and its gradient, at the
 * backward's start. The SwiGLU's output is read by the head in the forward
 * and by the head's weight gradient's product after the peak, while both
 * its inputs are read by swiglu's gradient later still; so it is computed
 * again there instead of held across the peak. */
static void test_recompute(void **state) {
  (void)state;
  model m;
  memset(&m, 0, sizeof m);
  pd_set_default_dtype(PD_FLOAT64);
  m.layers[0] = pd_nn_rms_norm(1, SHAPE(16), NULL);
  m.layers[1] = pd_nn_linear(16, 64, NULL);
  m.layers[2] = pd_nn_linear(16, 64, NULL);
  m.layers[3] = pd_nn_linear(64, 256, NULL);
  pd_set_default_dtype(PD_FLOAT32);
  m.main = pd_static_program(), m.startup = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(m.main, m.startup), PD_OK);
  pd_tensor *x = keep(&m, pd_static_data("x", 2, SHAPE(-1, 16), PD_FLOAT64));
  pd_tensor *n = keep(&m, pd_layer_call1(m.layers[0], x));
  pd_tensor *s =
      keep(&m, pd_swiglu(keep(&m, pd_layer_call1(m.layers[1], n)), keep(&m, pd_layer_call1(m.layers[2], n))));
  pd_tensor *o = keep(&m, pd_layer_call1(m.layers[3], s));
  pd_tensor *loss = keep(&m, pd_mean(keep(&m, pd_square(o)), NULL, 0, false));
  int np = keep_params_then_minimize(&m, loss);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  assert_int_equal(np, 7);
  m.feed_name[0] = "x", m.feed_value[0] = test_wave(64, 16, 1), m.n_feed = 1;
  assert_int_equal(check_recompute(&m, np, pd_pass_options_all(), "swiglu"), 1);
  assert_int_equal(check_recompute(&m, np, (pd_pass_options){.recompute = true}, "swiglu"), 1);
  model_free(&m);
}

/* Never where an input would have to live longer: x -> Linear(16, 64) ->
 * exp -> Linear(64, 256) -> mean of squares. exp's output is read in the
 * forward and after the peak in the backward, as the SwiGLU's above, but
 * its input (the first Linear's output) dies at the exp, so it is kept. */
static void test_no_recompute_of_a_dying_input(void **state) {
  (void)state;
  model m;
  memset(&m, 0, sizeof m);
  pd_set_default_dtype(PD_FLOAT64);
  m.layers[0] = pd_nn_linear(16, 64, NULL);
  m.layers[1] = pd_nn_linear(64, 256, NULL);
  pd_set_default_dtype(PD_FLOAT32);
  m.main = pd_static_program(), m.startup = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(m.main, m.startup), PD_OK);
  pd_tensor *x = keep(&m, pd_static_data("x", 2, SHAPE(-1, 16), PD_FLOAT64));
  pd_tensor *e = keep(&m, pd_exp(keep(&m, pd_layer_call1(m.layers[0], x))));
  pd_tensor *o = keep(&m, pd_layer_call1(m.layers[1], e));
  pd_tensor *loss = keep(&m, pd_mean(keep(&m, pd_square(o)), NULL, 0, false));
  int np = keep_params_then_minimize(&m, loss);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  m.feed_name[0] = "x", m.feed_value[0] = test_wave(64, 16, 1), m.n_feed = 1;
  assert_int_equal(check_recompute(&m, np, (pd_pass_options){.recompute = true}, "exp"), 0);
  model_free(&m);
}

/* The cond's branch: sum(v * 2), v the captured tensor. */
static int doubled_sum(void *user, pd_tensor **out, int cap) {
  (void)cap;
  pd_tensor *d = pd_scale((pd_tensor *)user, 2.0, 0.0, true);
  out[0] = d ? pd_sum(d, NULL, 0, false) : NULL;
  pd_tensor_release(d);
  return out[0] ? 1 : -1;
}

/* Never for a value a control op reads later: its sub-blocks read the
 * value by its name. x -> exp -> Linear(16, 256) -> mean of squares, then,
 * recorded after the backward and the updates, cond(mean(x) > -100,
 * sum(2 exp(x)), ...). exp's input is fed, so its output would qualify
 * for the head's weight gradient; the cond after it keeps it. */
static void test_no_recompute_for_a_control_op(void **state) {
  (void)state;
  model m;
  memset(&m, 0, sizeof m);
  pd_set_default_dtype(PD_FLOAT64);
  m.layers[0] = pd_nn_linear(16, 256, NULL);
  pd_set_default_dtype(PD_FLOAT32);
  m.main = pd_static_program(), m.startup = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(m.main, m.startup), PD_OK);
  pd_tensor *x = keep(&m, pd_static_data("x", 2, SHAPE(-1, 16), PD_FLOAT64));
  pd_tensor *v = keep(&m, pd_exp(x));
  pd_tensor *o = keep(&m, pd_layer_call1(m.layers[0], v));
  pd_tensor *loss = keep(&m, pd_mean(keep(&m, pd_square(o)), NULL, 0, false));
  int np = keep_params_then_minimize(&m, loss);
  pd_tensor *bound = keep(&m, pd_full(1, SHAPE(1), -100.0, PD_FLOAT64));
  pd_tensor *pred = keep(&m, pd_greater_than(keep(&m, pd_mean(x, NULL, 0, false)), bound));
  pd_tensor *s = NULL;
  assert_int_equal(pd_static_nn_cond(pred, doubled_sum, doubled_sum, v, &s, 1), 1);
  m.fetch[m.n_fetch++] = s;
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  m.feed_name[0] = "x", m.feed_value[0] = test_wave(64, 16, 1), m.n_feed = 1;
  assert_int_equal(check_recompute(&m, np, (pd_pass_options){.recompute = true}, "exp"), 0);
  model_free(&m);
}

/* The weight gradient folded into the SGD update: three training steps
 * with every pass against none; the parameters agree to 1e-10 (the fused
 * update rounds lr * sum once, the two ops twice). */
static void test_sgd_update_fused(void **state) {
  (void)state;
  pd_set_default_dtype(PD_FLOAT64);
  pd_layer *l1 = pd_nn_linear(16, 32, NULL), *l2 = pd_nn_linear(32, 1, NULL);
  pd_set_default_dtype(PD_FLOAT32);
  pd_program *main = pd_static_program(), *startup = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(main, startup), PD_OK);
  pd_tensor *x = pd_static_data("x", 2, SHAPE(-1, 16), PD_FLOAT64);
  pd_tensor *h = pd_layer_call1(l1, x), *r = pd_tanh(h), *o = pd_layer_call1(l2, r);
  pd_tensor *sq = pd_square(o), *loss = pd_mean(sq, NULL, 0, false);
  pd_optimizer *sgd = pd_optimizer_sgd(0.1, NULL, 0, NULL);
  assert_int_equal(pd_optimizer_minimize(sgd, loss), PD_OK);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  pd_executor *e[2] = {pd_static_executor(PD_CPU), pd_static_executor(PD_CPU)};
  pd_var_scope *sc[2] = {pd_static_scope(), pd_static_scope()};
  pd_executor_set_passes(e[1], &no_passes);
  pd_tensor *xv = test_wave(8, 16, 4);
  for (int k = 0; k < 2; k++)
    assert_int_equal(pd_executor_run(e[k], startup, NULL, 0, NULL, 0, NULL, sc[k]), PD_OK);
  for (int step = 0; step < 3; step++) {
    pd_tensor *got[2];
    for (int k = 0; k < 2; k++) {
      pd_static_feed f = {"x", xv};
      assert_int_equal(pd_executor_run(e[k], main, &f, 1, &loss, 1, &got[k], sc[k]), PD_OK);
    }
    expect_close(got[0], got[1], 1e-10, 1e-12);
    pd_tensor_release(got[0]), pd_tensor_release(got[1]);
  }
  assert_true(pd_executor_pass_stats(e[0])->gemm_epilogues >= 3); /* two bias epilogues, >= 1 update */
  const pd_static_block *lb = pd_executor_lowered_program(e[0])->blocks[0];
  int fused_sgd = 0;
  for (int k = 0; k < lb->n_ops; k++) fused_sgd += strcmp(lb->ops[k]->type, "fused_gemm_sgd") == 0;
  assert_int_equal(fused_sgd, 2);
  pd_named_tensors ps;
  assert_int_equal(pd_layer_parameters(l1, &ps), PD_OK);
  for (int i = 0; i < ps.n; i++)
    expect_close(pd_var_scope_find_var(sc[0], pd_tensor_name(ps.tensors[i])),
                 pd_var_scope_find_var(sc[1], pd_tensor_name(ps.tensors[i])), 1e-10, 1e-12);
  pd_named_tensors_free(&ps);
  pd_tensor *ts[] = {x, h, r, o, sq, loss, xv};
  for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) pd_tensor_release(ts[i]);
  pd_optimizer_release(sgd);
  for (int k = 0; k < 2; k++) pd_var_scope_release(sc[k]), pd_executor_release(e[k]);
  pd_program_release(main), pd_program_release(startup);
  pd_layer_release(l1), pd_layer_release(l2);
}

/* CompiledProgram with BuildStrategy fields mapped onto the passes, and
 * ExecutionStrategy's threads. */
static void test_compiled_program(void **state) {
  (void)state;
  model m;
  build_mlp(&m);
  pd_build_strategy off = pd_static_build_strategy();
  assert_true(off.fuse_elewise_add_act_ops && off.fuse_gemm_epilogue && off.enable_inplace &&
              off.memory_optimize);
  off.fuse_elewise_add_act_ops = off.enable_auto_fusion = off.fuse_gemm_epilogue = false;
  off.enable_inplace = off.memory_optimize = off.constant_folding = off.remove_dead_ops = false;
  off.fuse_bn_act_ops = true; /* accepted, no effect */
  pd_execution_strategy es = pd_static_execution_strategy();
  assert_int_equal(es.num_iteration_per_drop_scope, 100);
  es.num_threads = 1;
  pd_compiled_program *on = pd_static_compiled_program(m.main, NULL, &es);
  pd_compiled_program *plain = pd_static_compiled_program(m.main, &off, NULL);
  assert_non_null(on), assert_non_null(plain);
  pd_executor *e = pd_static_executor(PD_CPU);
  pd_var_scope *scope = pd_static_scope();
  assert_int_equal(pd_executor_run(e, m.startup, NULL, 0, NULL, 0, NULL, scope), PD_OK);
  pd_static_feed feed = {"x", m.feed_value[0]};
  pd_tensor *a[8], *b[8];
  int threads = pd_get_num_threads();
  assert_int_equal(pd_executor_run_compiled(e, on, &feed, 1, m.fetch, m.n_fetch, a, scope), PD_OK);
  assert_int_equal(pd_get_num_threads(), threads); /* restored after the run */
  const pd_pass_stats *s = pd_executor_pass_stats(e);
  int fused = s->ops_after;
  assert_true(s->gemm_epilogues > 0 && s->folded > 0);
  assert_true(pd_executor_arena_bytes(e) > 0);
  assert_int_equal(pd_executor_run_compiled(e, plain, &feed, 1, m.fetch, m.n_fetch, b, scope), PD_OK);
  s = pd_executor_pass_stats(e);
  assert_int_equal(s->ops_after, s->ops_before);
  assert_true(fused < s->ops_after);
  assert_int_equal(pd_executor_arena_bytes(e), 0); /* memory_optimize off: no arena */
  for (int i = 0; i < m.n_fetch; i++) {
    assert_memory_equal(pd_tensor_data(a[i]), pd_tensor_data(b[i]), (size_t)a[i]->numel * 8);
    pd_tensor_release(a[i]), pd_tensor_release(b[i]);
  }
  /* errors */
  assert_null(pd_static_compiled_program(NULL, NULL, NULL));
  assert_non_null(strstr(pd_last_error(), "program is NULL"));
  es.num_threads = -2;
  assert_null(pd_static_compiled_program(m.main, NULL, &es));
  assert_non_null(strstr(pd_last_error(), "num_threads is -2"));
  assert_int_equal(pd_executor_run_compiled(e, NULL, &feed, 1, m.fetch, m.n_fetch, a, scope), PD_ERR_INVALID);
  pd_compiled_program_release(on), pd_compiled_program_release(plain);
  pd_var_scope_release(scope);
  pd_executor_release(e);
  model_free(&m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fold_constants),
      cmocka_unit_test(test_remove_dead_ops),
      cmocka_unit_test(test_fuse_gemm_epilogue),
      cmocka_unit_test(test_fuse_dropout_add),
      cmocka_unit_test(test_no_fusion_of_a_shard_dropout),
      cmocka_unit_test(test_fuse_elementwise),
      cmocka_unit_test(test_fuse_elementwise_broadcast),
      cmocka_unit_test(test_fuse_rope),
      cmocka_unit_test(test_inplace),
      cmocka_unit_test(test_inplace_cross_entropy_grad),
      cmocka_unit_test(test_recompute),
      cmocka_unit_test(test_no_recompute_of_a_dying_input),
      cmocka_unit_test(test_no_recompute_for_a_control_op),
      cmocka_unit_test(test_sgd_update_fused),
      cmocka_unit_test(test_compiled_program),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
