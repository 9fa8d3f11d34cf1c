/* Static autodiff and training: append_backward and gradients against eager
 * autograd and hand-derived values, minimize (SGD, Adam) against the eager
 * optimizers, and seed 004's fluid program reaching the regression answer. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "paddlec/static.h"
#include "static/passes.h"
#include "static/static_internal.h"
#include "test_util.h"

static pd_tensor *fetch1(pd_executor *exe, pd_program *p, pd_static_feed *feed, int nf, pd_tensor *v,
                         pd_var_scope *scope) {
  pd_tensor *out = NULL;
  if (pd_executor_run(exe, p, feed, nf, &v, 1, &out, scope) != PD_OK) fail_msg("run: %s", pd_last_error());
  return out;
}

/* A LinearNet-like network (13 -> 10 -> relu -> 1) recorded from nn layers
 * gives the outputs and gradients eager gives, lowered for the feed shapes
 * or interpreted. */
static void check_layers_recorded_equal_eager(bool interpret) {
  pd_set_default_dtype(PD_FLOAT64);
  pd_layer *l1 = pd_nn_linear(13, 10, NULL), *l2 = pd_nn_linear(10, 1, NULL);
  pd_set_default_dtype(PD_FLOAT32);
  pd_tensor *xv = test_wave(6, 13, 0), *yv = test_wave(6, 1, 3);

  /* eager */
  pd_tensor *h = pd_layer_call1(l1, xv), *hr = pd_relu(h), *out = pd_layer_call1(l2, hr);
  pd_tensor *cost = pd_square_error_cost(out, yv), *loss = pd_mean(cost, NULL, 0, false);
  assert_int_equal(pd_backward(loss, NULL, false), PD_OK);
  pd_named_tensors ps1, ps2;
  assert_int_equal(pd_layer_parameters(l1, &ps1), PD_OK);
  assert_int_equal(pd_layer_parameters(l2, &ps2), PD_OK);

  /* static: the same layers called under the guard */
  pd_program *main = pd_static_program(), *startup = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(main, startup), PD_OK);
  pd_tensor *x = pd_static_data("x", 2, SHAPE(-1, 13), PD_FLOAT64);
  pd_tensor *y = pd_static_data("y", 2, SHAPE(-1, 1), PD_FLOAT64);
  pd_tensor *sh = pd_layer_call1(l1, x), *shr = pd_relu(sh), *sout = pd_layer_call1(l2, shr);
  pd_tensor *scost = pd_square_error_cost(sout, y), *sloss = pd_mean(scost, NULL, 0, false);
  assert_non_null(sloss);
  pd_tensor *params[8], *grads[8];
  int n = pd_static_append_backward(sloss, NULL, 0, NULL, 0, params, grads, 8);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  assert_int_equal(n, 4); /* both weights and biases */
  /* gradients are named as Paddle names them */
  char want[160];
  snprintf(want, sizeof want, "%s@GRAD", pd_tensor_name(ps1.tensors[0]));
  bool found = false;
  for (int i = 0; i < n; i++) found |= strcmp(pd_tensor_name(grads[i]), want) == 0;
  assert_true(found);

  pd_executor *exe = pd_static_executor(PD_CPU);
  pd_executor_set_interpret(exe, interpret);
  pd_var_scope *scope = pd_static_scope();
  assert_int_equal(pd_executor_run(exe, startup, NULL, 0, NULL, 0, NULL, scope), PD_OK);
  pd_static_feed feed[2] = {{"x", xv}, {"y", yv}};
  pd_tensor *fetch[6] = {sout, sloss, grads[0], grads[1], grads[2], grads[3]}, *got[6];
  assert_int_equal(pd_executor_run(exe, main, feed, 2, fetch, 6, got, scope), PD_OK);
  /* lowered, the step ran in an arena; interpreted, in none */
  if (interpret)
    assert_int_equal(pd_executor_arena_bytes(exe), 0);
  else
    assert_true(pd_executor_arena_bytes(exe) > 0);
  expect_close(got[0], out, 0, 1e-12);
  expect_close(got[1], loss, 0, 1e-12);
  for (int i = 0; i < n; i++) {
    pd_tensor *eager = NULL;
    for (int k = 0; k < ps1.n; k++)
      if (ps1.tensors[k] == params[i]) eager = pd_tensor_grad(ps1.tensors[k]);
    for (int k = 0; k < ps2.n; k++)
      if (ps2.tensors[k] == params[i]) eager = pd_tensor_grad(ps2.tensors[k]);
    assert_non_null(eager);
    expect_close(got[2 + i], eager, 0, 1e-12);
  }
  for (int i = 0; i < 6; i++) pd_tensor_release(got[i]);
  for (int i = 0; i < n; i++) {
    pd_tensor_release(params[i]);
    pd_tensor_release(grads[i]);
  }
  pd_tensor *ts[] = {h, hr, out, cost, loss, x, y, sh, shr, sout, scost, sloss, xv, yv};
  for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) pd_tensor_release(ts[i]);
  pd_named_tensors_free(&ps1);
  pd_named_tensors_free(&ps2);
  pd_var_scope_release(scope);
  pd_executor_release(exe);
  pd_program_release(main);
  pd_program_release(startup);
  pd_layer_release(l1);
  pd_layer_release(l2);
}

/* A training step of a recorded MLP (64 -> 256 -> relu -> 256 -> relu ->
 * 10, mean of squares, SGD) runs lowered in an arena: its activations and
 * gradients take no allocation per step, where the same plan without the
 * arena allocates them anew, and the losses are the same bits either way. */
static void test_arena_step_allocates_nothing(void **state) {
  (void)state;
  pd_set_default_dtype(PD_FLOAT64);
  pd_layer *l1 = pd_nn_linear(64, 256, NULL), *l2 = pd_nn_linear(256, 256, NULL),
           *l3 = pd_nn_linear(256, 10, NULL);
  pd_set_default_dtype(PD_FLOAT32);
  pd_program *main = pd_static_program(), *startup = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(main, startup), PD_OK);
  pd_tensor *x = pd_static_data("x", 2, SHAPE(-1, 64), PD_FLOAT64);
  pd_tensor *h1 = pd_layer_call1(l1, x), *r1 = pd_relu(h1), *h2 = pd_layer_call1(l2, r1), *r2 = pd_relu(h2);
  pd_tensor *o = pd_layer_call1(l3, r2), *sq = pd_square(o), *loss = pd_mean(sq, NULL, 0, false);
  pd_optimizer *so = pd_optimizer_sgd(0.01, NULL, 0, NULL);
  assert_int_equal(pd_optimizer_minimize(so, loss), PD_OK);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);

  pd_executor *with = pd_static_executor(PD_CPU), *without = pd_static_executor(PD_CPU);
  pd_executor_set_arena(without, false);
  pd_var_scope *s1 = pd_static_scope(), *s2 = pd_static_scope();
  assert_int_equal(pd_executor_run(with, startup, NULL, 0, NULL, 0, NULL, s1), PD_OK);
  assert_int_equal(pd_executor_run(without, startup, NULL, 0, NULL, 0, NULL, s2), PD_OK);
  size_t grew[2] = {0, 0};
  for (int step = 0; step < 4; step++) {
    pd_tensor *xv = test_wave(32, 64, step);
    pd_static_feed feed = {"x", xv};
    pd_tensor *got[2];
    for (int k = 0; k < 2; k++) {
      pd_memory_reset_peak();
      size_t base = pd_memory_allocated();
      assert_int_equal(pd_executor_run(k ? without : with, main, &feed, 1, &loss, 1, &got[k], k ? s2 : s1),
                       PD_OK);
      grew[k] = pd_memory_peak() - base;
    }
    assert_memory_equal(pd_tensor_data(got[0]), pd_tensor_data(got[1]), sizeof(double));
    pd_tensor_release(got[0]), pd_tensor_release(got[1]), pd_tensor_release(xv);
  }
  /* one 32 x 256 float64 activation is 64 KiB; a step in the arena needs
   * at most the fetched loss and small bookkeeping */
  size_t arena = pd_executor_arena_bytes(with);
  if (arena < 3 * 32 * 256 * 8 || grew[0] > 4096 || grew[1] < 3 * 32 * 256 * 8)
    fail_msg("arena %zu bytes; a step grew memory by %zu bytes in it and %zu without", arena, grew[0],
             grew[1]);
  print_message("arena %zu bytes; a step grew memory by %zu bytes in it, %zu without\n", arena, grew[0],
                grew[1]);
  assert_int_equal(pd_executor_arena_bytes(without), 0);
  pd_tensor *ts[] = {x, h1, r1, h2, r2, o, sq, loss};
  for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) pd_tensor_release(ts[i]);
  pd_optimizer_release(so);
  pd_var_scope_release(s1), pd_var_scope_release(s2);
  pd_executor_release(with), pd_executor_release(without);
  pd_program_release(main), pd_program_release(startup);
  pd_layer_release(l1), pd_layer_release(l2), pd_layer_release(l3);
}

/* Losses reduced over a batch the Program does not know yet (-1): the mean
 * counts when the Program runs. It was once a constant taken from the
 * unknown size (1 / -1), which negated the loss. */
static void test_loss_means_with_unknown_batch(void **state) {
  (void)state;
  pd_tensor *xv = test_wave(6, 5, 1), *yv = test_wave(6, 5, 2);
  pd_tensor *lab = pd_randint(0, 5, 1, SHAPE(6), PD_INT64);
  pd_tensor *logp = pd_log_softmax(xv, -1), *p = pd_softmax(yv, -1);
  pd_tensor *eager[4] = {pd_cross_entropy(xv, lab, NULL, -100, PD_REDUCTION_MEAN, false, -1, true, 0.0),
                         pd_mse_loss(xv, yv, PD_REDUCTION_MEAN),
                         pd_kl_div(logp, p, PD_REDUCTION_BATCHMEAN, false),
                         pd_l1_loss(xv, yv, PD_REDUCTION_SUM)};
  pd_program *main = pd_static_program(), *startup = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(main, startup), PD_OK);
  pd_tensor *x = pd_static_data("x", 2, SHAPE(-1, 5), PD_FLOAT64),
            *y = pd_static_data("y", 2, SHAPE(-1, 5), PD_FLOAT64);
  pd_tensor *l = pd_static_data("l", 1, SHAPE(-1), PD_INT64);
  pd_tensor *slogp = pd_log_softmax(x, -1), *sp = pd_softmax(y, -1);
  pd_tensor *st[4] = {pd_cross_entropy(x, l, NULL, -100, PD_REDUCTION_MEAN, false, -1, true, 0.0),
                      pd_mse_loss(x, y, PD_REDUCTION_MEAN),
                      pd_kl_div(slogp, sp, PD_REDUCTION_BATCHMEAN, false),
                      pd_l1_loss(x, y, PD_REDUCTION_SUM)};
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  pd_executor *exe = pd_static_executor(PD_CPU);
  pd_var_scope *scope = pd_static_scope();
  pd_static_feed feed[3] = {{"x", xv}, {"y", yv}, {"l", lab}};
  pd_tensor *got[4];
  assert_int_equal(pd_executor_run(exe, main, feed, 3, st, 4, got, scope), PD_OK);
  for (int i = 0; i < 4; i++) {
    expect_close(got[i], eager[i], 1e-14, 0);
    pd_tensor_release(got[i]), pd_tensor_release(eager[i]), pd_tensor_release(st[i]);
  }
  pd_tensor *ts[] = {xv, yv, lab, logp, p, x, y, l, slogp, sp};
  for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) pd_tensor_release(ts[i]);
  pd_var_scope_release(scope);
  pd_executor_release(exe);
  pd_program_release(main), pd_program_release(startup);
}

static void test_layers_recorded_equal_eager(void **state) {
  (void)state;
  check_layers_recorded_equal_eager(false);
}
static void test_layers_interpreted_equal_eager(void **state) {
  (void)state;
  check_layers_recorded_equal_eager(true);
}

/* y = x * x + 3 x: dy/dx = 2 x + 3; x feeds three ops, whose gradients add. */
static void test_gradients_hand_derived(void **state) {
  (void)state;
  pd_program *main = pd_static_program(), *startup = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(main, startup), PD_OK);
  pd_tensor *x = pd_static_data("x", 1, SHAPE(-1), PD_FLOAT64);
  pd_tensor_set_stop_gradient(x, false);
  pd_tensor *xx = pd_multiply(x, x), *x3 = pd_scale(x, 3.0, 0.0, true), *y = pd_add(xx, x3);
  pd_tensor *dx = NULL;
  assert_int_equal(pd_static_gradients(&y, 1, &x, 1, NULL, NULL, 0, &dx), PD_OK);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  assert_non_null(dx);
  assert_string_equal(pd_tensor_name(dx), "x@GRAD");
  pd_static_block *gb = pd_program_global_block(main);
  /* three contributions, summed by add ops into x@GRAD */
  assert_non_null(pd_static_block_var(gb, "x@GRAD@RENAME@block0@0"));
  assert_non_null(pd_static_block_var(gb, "x@GRAD@RENAME@block0@2"));
  char *s = pd_program_to_string(main);
  assert_non_null(strstr(s, "multiply_grad("));
  assert_non_null(strstr(s, "scale_grad("));
  free(s);

  pd_executor *exe = pd_static_executor(PD_CPU);
  pd_var_scope *scope = pd_static_scope();
  pd_tensor *xv = T(PD_FLOAT64, 1, SHAPE(3), -1.5, 0.0, 2.0);
  pd_static_feed feed = {"x", xv};
  pd_tensor *g = fetch1(exe, main, &feed, 1, dx, scope);
  EXPECT_VALUES(g, 1e-15, 0.0, 3.0, 7.0);
  pd_tensor_release(g);
  /* a given target gradient scales it */
  pd_tensor_release(xv);
  pd_tensor *ts[] = {x, xx, x3, y, dx};
  for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) pd_tensor_release(ts[i]);
  pd_var_scope_release(scope);
  pd_executor_release(exe);
  pd_program_release(main);
  pd_program_release(startup);
}

/* reshape_, unsqueeze_ and squeeze_ under the guard record their view ops
 * writing new Variables of the new shapes, which the handle then stands
 * for (as Paddle's static reshape_ is reshape): the values and the
 * gradient through them are the eager ones. A parameter's shape cannot
 * change so. */
static void test_inplace_shape_changes_record_as_views(void **state) {
  (void)state;
  pd_layer *fc = pd_nn_linear(2, 3, NULL);
  pd_tensor *w = pd_layer_parameter(fc, "weight");
  pd_program *main = pd_static_program(), *startup = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(main, startup), PD_OK);
  pd_tensor *x = pd_static_data("x", 1, SHAPE(6), PD_FLOAT64);
  pd_tensor_set_stop_gradient(x, false);
  pd_tensor *h = pd_scale(x, 2.0, 0.0, true);
  pd_tensor *same[3];
  same[0] = pd_reshape_(h, 2, SHAPE(2, 3));
  same[1] = pd_unsqueeze_(h, 1, SHAPE(0));
  assert_int_equal(pd_tensor_ndim(h), 3);
  same[2] = pd_squeeze_(h, 1, SHAPE(0));
  for (int i = 0; i < 3; i++) {
    assert_ptr_equal(same[i], h);
    pd_tensor_release(same[i]);
  }
  assert_int_equal(pd_tensor_ndim(h), 2);
  assert_int_equal(pd_tensor_shape(h)[1], 3);
  pd_tensor *hh = pd_multiply(h, h), *y = pd_sum(hh, SHAPE(1), 1, false), *dx = NULL;
  assert_int_equal(pd_tensor_ndim(y), 1);
  assert_int_equal(pd_static_gradients(&y, 1, &x, 1, NULL, NULL, 0, &dx), PD_OK);
  assert_null(pd_reshape_(w, 1, SHAPE(6)));
  assert_non_null(strstr(pd_last_error(), "reshape_: "));
  assert_non_null(strstr(pd_last_error(), "persistable"));
  pd_clear_error();
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  assert_int_equal(pd_tensor_ndim(w), 2);
  char *s = pd_program_to_string(main);
  assert_non_null(strstr(s, " reshape("));
  assert_non_null(strstr(s, " unsqueeze("));
  assert_non_null(strstr(s, " squeeze("));
  assert_null(strstr(s, "reshape_("));
  assert_null(strstr(s, "squeeze_("));
  free(s);
  pd_tensor *xs = pd_static_block_var(pd_program_global_block(main), "x");
  assert_int_equal(pd_tensor_ndim(xs), 1); /* the feed keeps its shape */

  pd_executor *exe = pd_static_executor(PD_CPU);
  pd_var_scope *scope = pd_static_scope();
  pd_tensor *xv = T(PD_FLOAT64, 1, SHAPE(6), 1.0, 2.0, 3.0, -1.0, 0.5, 4.0);
  pd_static_feed feed = {"x", xv};
  pd_tensor *fetch[2] = {y, dx}, *got[2];
  assert_int_equal(pd_executor_run(exe, main, &feed, 1, fetch, 2, got, scope), PD_OK);
  EXPECT_VALUES(got[0], 1e-12, 56.0, 69.0); /* 4 (1 + 4 + 9), 4 (1 + 0.25 + 16) */
  EXPECT_VALUES(got[1], 1e-12, 8.0, 16.0, 24.0, -8.0, 4.0, 32.0);
  for (int i = 0; i < 2; i++) pd_tensor_release(got[i]);
  pd_tensor *ts[] = {xv, x, h, hh, y, dx};
  for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) pd_tensor_release(ts[i]);
  pd_var_scope_release(scope);
  pd_executor_release(exe);
  pd_program_release(main);
  pd_program_release(startup);
  pd_layer_release(fc);
}

/* A backward rule that reads values (index_sample's indices) cannot be
 * traced: its grad op stays in the lowered program, the rest is lowered,
 * and the gradients equal the interpreted ones. */
static void test_value_reading_rule_keeps_its_grad_op(void **state) {
  (void)state;
  pd_program *main = pd_static_program(), *startup = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(main, startup), PD_OK);
  pd_tensor *x = pd_static_data("x", 2, SHAPE(-1, 4), PD_FLOAT64);
  pd_tensor *idx = pd_static_data("idx", 2, SHAPE(-1, 2), PD_INT64);
  pd_tensor_set_stop_gradient(x, false);
  pd_tensor *sx = pd_scale(x, 3.0, 0.0, true), *y = pd_index_sample(sx, idx), *l = pd_sum(y, NULL, 0, false);
  pd_tensor *dx = NULL;
  assert_int_equal(pd_static_gradients(&l, 1, &x, 1, NULL, NULL, 0, &dx), PD_OK);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  pd_tensor *xv = test_wave(2, 4, 0);
  int64_t iv[] = {0, 3, 1, 1};
  pd_tensor *ixv = pd_to_tensor(iv, PD_INT64, 2, SHAPE(2, 2));
  pd_static_feed feed[2] = {{"x", xv}, {"idx", ixv}};
  pd_tensor *got[2];
  for (int interpret = 0; interpret < 2; interpret++) {
    pd_executor *exe = pd_static_executor(PD_CPU);
    pd_executor_set_interpret(exe, interpret);
    assert_int_equal(pd_executor_run(exe, main, feed, 2, &dx, 1, &got[interpret], NULL), PD_OK);
    assert_true(interpret ? pd_executor_compile_seconds(exe) == -1.0 : pd_executor_compile_seconds(exe) > 0);
    if (!interpret) {
      const pd_program *low = pd_executor_lowered_program(exe);
      assert_non_null(low); /* lowered, one grad op kept */
      int kept = 0, traced_scale = 0;
      for (int k = 0; k < low->blocks[0]->n_ops; k++) {
        const pd_operator *op = low->blocks[0]->ops[k];
        kept += op->grad_of >= 0 && strcmp(op->type, "index_sample_grad") == 0;
        traced_scale += op->op_id >= 0 && strcmp(op->type, "scale") == 0 && (op->role & PD_OP_ROLE_BACKWARD);
      }
      assert_int_equal(kept, 1);
      assert_true(traced_scale >= 1); /* scale_grad was traced */
    }
    pd_executor_release(exe);
  }
  EXPECT_VALUES(got[0], 0, 3, 0, 0, 3, 0, 6, 0, 0);
  expect_close(got[0], got[1], 0, 0);
  pd_tensor *ts[] = {x, idx, sx, y, l, dx, xv, ixv, got[0], got[1]};
  for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) pd_tensor_release(ts[i]);
  pd_program_release(main);
  pd_program_release(startup);
}

/* An output no gradient reaches gets zeros known when the program is
 * lowered, as eager autograd passes them: cross entropy's backward skips
 * the term of its lse output (g_lse * exp(x - lse)), so the lowered plan,
 * no passes run, has no exp, and the logits' gradient equals eager's bit
 * for bit. */
static void test_unread_output_gradient_is_known_zero(void **state) {
  (void)state;
  pd_tensor *xv = test_wave(6, 5, 1);
  int64_t lv[] = {0, 4, 2, 1, 3, 0};
  pd_tensor *labels = pd_to_tensor(lv, PD_INT64, 2, SHAPE(6, 1));
  /* eager */
  pd_tensor *xe = pd_assign(xv);
  pd_tensor_set_stop_gradient(xe, false);
  pd_tensor *le = pd_cross_entropy(xe, labels, NULL, -100, PD_REDUCTION_MEAN, false, -1, true, 0.0);
  assert_int_equal(pd_backward(le, NULL, false), PD_OK);
  /* static */
  pd_program *main = pd_static_program(), *startup = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(main, startup), PD_OK);
  pd_tensor *x = pd_static_data("x", 2, SHAPE(-1, 5), PD_FLOAT64);
  pd_tensor *y = pd_static_data("y", 2, SHAPE(-1, 1), PD_INT64);
  pd_tensor_set_stop_gradient(x, false);
  pd_tensor *l = pd_cross_entropy(x, y, NULL, -100, PD_REDUCTION_MEAN, false, -1, true, 0.0), *dx = NULL;
  assert_non_null(l);
  assert_int_equal(pd_static_gradients(&l, 1, &x, 1, NULL, NULL, 0, &dx), PD_OK);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  pd_executor *exe = pd_static_executor(PD_CPU);
  pd_executor_set_passes(exe, &(pd_pass_options){0});
  pd_static_feed feed[2] = {{"x", xv}, {"y", labels}};
  pd_tensor *got = NULL;
  assert_int_equal(pd_executor_run(exe, main, feed, 2, &dx, 1, &got, NULL), PD_OK);
  const pd_static_block *lb = pd_executor_lowered_program(exe)->blocks[0];
  int exps = 0, ce_grads = 0;
  for (int k = 0; k < lb->n_ops; k++) {
    exps += strcmp(lb->ops[k]->type, "exp") == 0;
    ce_grads += strcmp(lb->ops[k]->type, "cross_entropy_with_softmax_grad") == 0;
  }
  assert_int_equal(ce_grads, 1);
  assert_int_equal(exps, 0);
  expect_close(got, pd_tensor_grad(xe), 0, 0);
  pd_tensor *ts[] = {xv, labels, xe, le, x, y, l, dx, got};
  for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) pd_tensor_release(ts[i]);
  pd_executor_release(exe);
  pd_program_release(main), pd_program_release(startup);
}

/* Ops flagged PD_OPF_BACKWARD_READS_VALUES (masked_select's positions,
 * max's ties) keep their grad ops in the lowered program without their
 * rules being traced on Variables; the gradients equal the interpreted
 * ones and the hand-derived mask + argmax one-hot. */
static void test_flagged_rules_keep_their_grad_ops(void **state) {
  (void)state;
  assert_true(pd_op_table[PD_OP_masked_select]->flags & PD_OPF_BACKWARD_READS_VALUES);
  assert_true(pd_op_table[PD_OP_max]->flags & PD_OPF_BACKWARD_READS_VALUES);
  for (int id = 0; id < PD_NUM_OPS; id++) /* a flagged op has a rule to keep */
    if (pd_op_table[id]->flags & PD_OPF_BACKWARD_READS_VALUES) assert_non_null(pd_op_table[id]->backward);
  pd_program *main = pd_static_program(), *startup = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(main, startup), PD_OK);
  pd_tensor *x = pd_static_data("x", 2, SHAPE(-1, 3), PD_FLOAT64);
  pd_tensor *m = pd_static_data("m", 2, SHAPE(-1, 3), PD_BOOL);
  pd_tensor_set_stop_gradient(x, false);
  pd_tensor *sel = pd_masked_select(x, m), *s = pd_sum(sel, NULL, 0, false), *mx = pd_max(x, NULL, 0, false);
  pd_tensor *l = pd_add(s, mx), *dx = NULL;
  assert_int_equal(pd_static_gradients(&l, 1, &x, 1, NULL, NULL, 0, &dx), PD_OK);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  double xs[] = {0.5, -1, 2, 0, 3, 1};
  bool ms[] = {true, false, true, false, false, true};
  pd_tensor *xv = pd_tensor_from_f64(xs, PD_FLOAT64, 2, SHAPE(2, 3));
  pd_tensor *mv = pd_to_tensor(ms, PD_BOOL, 2, SHAPE(2, 3));
  pd_static_feed feed[2] = {{"x", xv}, {"m", mv}};
  pd_tensor *got[2];
  for (int interpret = 0; interpret < 2; interpret++) {
    pd_executor *exe = pd_static_executor(PD_CPU);
    pd_executor_set_interpret(exe, interpret);
    assert_int_equal(pd_executor_run(exe, main, feed, 2, &dx, 1, &got[interpret], NULL), PD_OK);
    assert_true(interpret ? pd_executor_compile_seconds(exe) == -1.0 : pd_executor_compile_seconds(exe) > 0);
    if (!interpret) {
      const pd_program *low = pd_executor_lowered_program(exe);
      assert_non_null(low);
      int kept = 0;
      for (int k = 0; k < low->blocks[0]->n_ops; k++) {
        const pd_operator *op = low->blocks[0]->ops[k];
        kept += op->grad_of == PD_OP_masked_select || op->grad_of == PD_OP_max;
      }
      assert_int_equal(kept, 2);
    }
    pd_executor_release(exe);
  }
  EXPECT_VALUES(got[0], 0, 1, 0, 1, 0, 1, 1);
  expect_close(got[0], got[1], 0, 0);
  pd_tensor *ts[] = {x, m, sel, s, mx, l, dx, xv, mv, got[0], got[1]};
  for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) pd_tensor_release(ts[i]);
  pd_program_release(main);
  pd_program_release(startup);
}

/* No gradient flows to a stop_gradient input or one in no_grad_set. */
static void test_no_grad(void **state) {
  (void)state;
  pd_tensor *stranger = pd_zeros(1, SHAPE(1), PD_FLOAT64); /* eager: made before the guard */
  pd_program *main = pd_static_program(), *startup = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(main, startup), PD_OK);
  pd_tensor *x = pd_static_data("x", 1, SHAPE(4), PD_FLOAT64);
  pd_tensor *w = pd_static_create_parameter(1, SHAPE(4), PD_FLOAT64, "w", NULL, false);
  pd_tensor *v = pd_static_create_parameter(1, SHAPE(4), PD_FLOAT64, "v", NULL, false);
  pd_tensor *xw = pd_multiply(x, w), *y = pd_multiply(xw, v);
  pd_tensor *loss = pd_sum(y, NULL, 0, false);
  pd_tensor *ps[4], *gs[4];
  int n = pd_static_append_backward(loss, NULL, 0, &v, 1, ps, gs, 4);
  assert_int_equal(n, 1);
  assert_string_equal(pd_tensor_name(ps[0]), "w");
  pd_tensor *gx = (pd_tensor *)1;
  assert_int_equal(pd_static_gradients(&loss, 1, &x, 1, NULL, NULL, 0, &gx), PD_OK);
  assert_null(gx); /* x stops gradients (static.data's default) */
  /* a tensor of no program being built */
  int r = pd_static_append_backward(stranger, NULL, 0, NULL, 0, NULL, NULL, 0);
  if (r >= 0) fail_msg("%d %s", r, pd_last_error());
  assert_non_null(strstr(pd_last_error(), "no Variable"));
  pd_clear_error();
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  pd_tensor *ts[] = {x, w, v, xw, y, loss, ps[0], gs[0], stranger};
  for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) pd_tensor_release(ts[i]);
  pd_program_release(main);
  pd_program_release(startup);
}

/* Steps of a static optimizer on a recorded layer equal the eager
 * optimizer's on the same starting values. kind 0: SGD with a StepDecay
 * schedule (stepped between runs), 1: Adam, 2: AdamW with weight decay,
 * 3: SGD with ClipGradByGlobalNorm, 4: Adam with ClipGradByNorm (both
 * small enough to clip). */
static const pd_grad_clip *clip_of(int kind) {
  static pd_grad_clip global, each;
  global = pd_nn_clip_grad_by_global_norm(0.05);
  each = pd_nn_clip_grad_by_norm(0.02);
  return kind == 3 ? &global : kind == 4 ? &each : NULL;
}

static pd_optimizer *make_optimizer(int kind, pd_tensor **params, int n, pd_lr_scheduler *sched) {
  if (kind == 0) return pd_optimizer_sgd(0.1, params, n, &(pd_optimizer_sgd_opts){.lr_scheduler = sched});
  if (kind == 3)
    return pd_optimizer_sgd(0.1, params, n, &(pd_optimizer_sgd_opts){.grad_clip = clip_of(kind)});
  if (kind == 4) {
    pd_optimizer_adam_opts ao = pd_optimizer_adam_defaults();
    ao.grad_clip = clip_of(kind);
    return pd_optimizer_adam(0.01, params, n, &ao);
  }
  if (kind == 1) {
    pd_optimizer_adam_opts ao = pd_optimizer_adam_defaults();
    return pd_optimizer_adam(0.01, params, n, &ao);
  }
  pd_optimizer_adam_w_opts wo = pd_optimizer_adam_w_defaults();
  wo.weight_decay = 0.1;
  return pd_optimizer_adam_w(0.01, params, n, &wo);
}

static void check_optimizer_matches_eager(int kind) {
  pd_set_default_dtype(PD_FLOAT64);
  pd_layer *ls = pd_nn_linear(5, 3, NULL), *le = pd_nn_linear(5, 3, NULL);
  pd_set_default_dtype(PD_FLOAT32);
  pd_named_tensors pe, pst;
  assert_int_equal(pd_layer_parameters(le, &pe), PD_OK);
  assert_int_equal(pd_layer_parameters(ls, &pst), PD_OK);
  for (int i = 0; i < pe.n; i++) { /* the same starting values */
    pd_tensor *c = pd_assign(pst.tensors[i]);
    int64_t n = pd_tensor_numel(c);
    int64_t got = pd_tensor_copy_to(c, pd_tensor_data(pe.tensors[i]), n, PD_FLOAT64);
    if (got != n) fail_msg("%s", pd_last_error());
    pd_tensor_release(c);
  }
  pd_lr_scheduler *es = pd_optimizer_lr_step_decay(0.1, 1, 0.5),
                  *ss = pd_optimizer_lr_step_decay(0.1, 1, 0.5);
  pd_optimizer *eo = make_optimizer(kind, pe.tensors, pe.n, es);

  pd_program *main = pd_static_program(), *startup = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(main, startup), PD_OK);
  pd_tensor *x = pd_static_data("x", 2, SHAPE(-1, 5), PD_FLOAT64);
  pd_tensor *out = pd_layer_call1(ls, x), *sq = pd_square(out), *loss = pd_mean(sq, NULL, 0, false);
  pd_optimizer *so = make_optimizer(kind, NULL, 0, ss);
  assert_non_null(so);
  assert_int_equal(pd_optimizer_minimize(so, loss), PD_OK);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);

  pd_executor *exe = pd_static_executor(PD_CPU);
  pd_var_scope *scope = pd_static_scope();
  assert_int_equal(pd_executor_run(exe, startup, NULL, 0, NULL, 0, NULL, scope), PD_OK);
  for (int step = 0; step < 3; step++) {
    pd_tensor *xv = test_wave(4, 5, step);
    pd_static_feed feed = {"x", xv};
    pd_tensor *sl = fetch1(exe, main, &feed, 1, loss, scope);
    pd_tensor *eout = pd_layer_call1(le, xv), *esq = pd_square(eout), *el = pd_mean(esq, NULL, 0, false);
    expect_close(sl, el, 0, 1e-12);
    assert_int_equal(pd_optimizer_minimize(eo, el), PD_OK);
    pd_optimizer_clear_grad(eo, true);
    assert_int_equal(pd_lr_step(es), PD_OK);
    assert_int_equal(pd_lr_step(ss), PD_OK); /* the next run reads the new rate */
    pd_tensor *ts[] = {xv, sl, eout, esq, el};
    for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) pd_tensor_release(ts[i]);
  }
  for (int i = 0; i < pst.n; i++) {
    pd_tensor *now = pd_var_scope_find_var(scope, pd_tensor_name(pst.tensors[i]));
    assert_non_null(now);
    expect_close(now, pe.tensors[i], 0, 1e-12);
  }
  pd_tensor *ts[] = {x, out, sq, loss};
  for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) pd_tensor_release(ts[i]);
  pd_optimizer_release(eo);
  pd_optimizer_release(so);
  pd_lr_release(es);
  pd_lr_release(ss);
  pd_named_tensors_free(&pe);
  pd_named_tensors_free(&pst);
  pd_var_scope_release(scope);
  pd_executor_release(exe);
  pd_program_release(main);
  pd_program_release(startup);
  pd_layer_release(ls);
  pd_layer_release(le);
}

static void test_sgd_with_lr_scheduler_matches_eager(void **state) {
  (void)state;
  check_optimizer_matches_eager(0);
}
static void test_adam_matches_eager(void **state) {
  (void)state;
  check_optimizer_matches_eager(1);
}
static void test_adamw_matches_eager(void **state) {
  (void)state;
  check_optimizer_matches_eager(2);
}
static void test_norm_clipping_matches_eager(void **state) {
  (void)state;
  check_optimizer_matches_eager(3);
  check_optimizer_matches_eager(4);
}

/* Seed 004: x = data([13]), fc(size=1), square_error_cost, mean, SGD
 * minimize, on y = x . w* + b* without noise: training reaches w*, b*. */
static void test_seed004_fluid_program_converges(void **state) {
  (void)state;
  enum { N = 64, D = 13 };
  double w_true[D], b_true = -0.75;
  for (int j = 0; j < D; j++) w_true[j] = 0.1 * (j - 6);
  pd_tensor *xv = test_wave(N, D, 0.5);
  const double *xd = pd_tensor_data(xv);
  double ys[N];
  for (int i = 0; i < N; i++) {
    ys[i] = b_true;
    for (int j = 0; j < D; j++) ys[i] += xd[i * D + j] * w_true[j];
  }
  pd_tensor *yv = pd_tensor_from_f64(ys, PD_FLOAT64, 2, SHAPE(N, 1));

  pd_program *main = pd_static_program(), *startup = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(main, startup), PD_OK);
  pd_tensor *x = pd_static_data("x", 2, SHAPE(-1, D), PD_FLOAT64);
  pd_tensor *y = pd_static_data("y", 2, SHAPE(-1, 1), PD_FLOAT64);
  pd_tensor *y_predict = pd_static_nn_fc(x, 1, 1, NULL);
  pd_tensor *cost = pd_square_error_cost(y_predict, y);
  pd_tensor *avg_loss = pd_mean(cost, NULL, 0, false);
  pd_optimizer *sgd = pd_optimizer_sgd(0.5, NULL, 0, NULL);
  assert_int_equal(pd_optimizer_minimize(sgd, avg_loss), PD_OK);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  const char *wname = NULL, *bname = NULL;
  pd_tensor *vars[64];
  int nv = pd_program_list_vars(main, vars, 64);
  for (int i = 0; i < nv; i++) {
    pd_static_var_info info;
    assert_int_equal(pd_program_var_info(main, pd_tensor_name(vars[i]), &info), PD_OK);
    if (info.is_parameter && info.ndim == 2) wname = info.name;
    if (info.is_parameter && info.ndim == 1) bname = info.name;
  }
  assert_non_null(strstr(wname, "fc_"));
  assert_non_null(strstr(wname, ".w_0"));

  pd_executor *exe = pd_static_executor(PD_CPU);
  pd_var_scope *scope = pd_static_scope();
  assert_int_equal(pd_static_scope_guard_begin(scope), PD_OK); /* runs below use it */
  assert_int_equal(pd_executor_run(exe, startup, NULL, 0, NULL, 0, NULL, NULL), PD_OK);
  pd_static_feed feed[2] = {{"x", xv}, {"y", yv}};
  double first = 0, last = 0;
  for (int step = 0; step < 3000; step++) {
    pd_tensor *l = fetch1(exe, main, feed, 2, avg_loss, NULL);
    if (step == 0) first = pd_tensor_item(l);
    last = pd_tensor_item(l);
    pd_tensor_release(l);
  }
  assert_int_equal(pd_static_scope_guard_end(), PD_OK);
  /* the step ran lowered for its feed shapes: registry ops, folded
   * constants and fused ops only, each grad op replaced by its backward
   * rule's ops */
  const pd_program *low = pd_executor_lowered_program(exe);
  assert_non_null(low);
  const pd_static_block *lb = low->blocks[0];
  int n_matmul = 0;
  for (int k = 0; k < lb->n_ops; k++) {
    assert_true(lb->ops[k]->op_id >= 0 || lb->ops[k]->value || lb->ops[k]->fused);
    assert_int_equal(lb->ops[k]->grad_of, -1);
    n_matmul += strcmp(lb->ops[k]->type, "matmul") == 0 || strncmp(lb->ops[k]->type, "fused_gemm", 10) == 0;
  }
  assert_true(n_matmul >= 2); /* the forward's and the weight gradient's */
  assert_true(first > 0.1);
  assert_true(last < 1e-16);
  pd_tensor *w = pd_var_scope_find_var(scope, wname), *b = pd_var_scope_find_var(scope, bname);
  assert_non_null(w);
  expect_values(w, w_true, D, 1e-7);
  EXPECT_VALUES(b, 1e-7, -0.75);
  pd_tensor *ts[] = {xv, yv, x, y, y_predict, cost, avg_loss};
  for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) pd_tensor_release(ts[i]);
  pd_optimizer_release(sgd);
  pd_var_scope_release(scope);
  pd_executor_release(exe);
  pd_program_release(main);
  pd_program_release(startup);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_layers_recorded_equal_eager),
      cmocka_unit_test(test_arena_step_allocates_nothing),
      cmocka_unit_test(test_loss_means_with_unknown_batch),
      cmocka_unit_test(test_layers_interpreted_equal_eager),
      cmocka_unit_test(test_gradients_hand_derived),
      cmocka_unit_test(test_inplace_shape_changes_record_as_views),
      cmocka_unit_test(test_value_reading_rule_keeps_its_grad_op),
      cmocka_unit_test(test_flagged_rules_keep_their_grad_ops),
      cmocka_unit_test(test_unread_output_gradient_is_known_zero),
      cmocka_unit_test(test_no_grad),
      cmocka_unit_test(test_sgd_with_lr_scheduler_matches_eager),
      cmocka_unit_test(test_adam_matches_eager),
      cmocka_unit_test(test_adamw_matches_eager),
      cmocka_unit_test(test_norm_clipping_matches_eager),
      cmocka_unit_test(test_seed004_fluid_program_converges),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
