/* The writes the library makes into tensors it owns are registry ops:
 * copy_, fill_ and scale_ themselves, and the callers that used to write
 * memory directly (set_state_dict, the optimizer's rate slot and restored
 * accumulators, gradient merge's average) now reach a tracer through the
 * dispatcher. */
#include <string.h>

#include "distributed/dataparallel/dp_internal.h"
#include "ops/op_registry.h"
#include "paddlec/fleet.h"
#include "test_util.h"

static void expect_last_error(const char *frag1, const char *frag2) {
  const char *e = pd_last_error();
  if (!strstr(e, frag1) || (frag2 && !strstr(e, frag2)))
    fail_msg("error '%s' lacks '%s' or '%s'", e, frag1, frag2 ? frag2 : "");
  pd_clear_error();
}

static void test_copy_fill_scale(void **state) {
  (void)state;
  pd_scope_begin();
  /* copy_: broadcast src, converted to x's dtype, into a transposed view */
  pd_tensor *base = pd_zeros(2, SHAPE(3, 2), PD_FLOAT32);
  pd_tensor *xt = pd_transpose(base, 2, SHAPE(1, 0)); /* [2, 3], not contiguous */
  pd_tensor *src = T(PD_FLOAT64, 2, SHAPE(2, 1), 1.5, -2);
  uint32_t v0 = pd_tensor_version(base);
  assert_int_equal(pd_write_copy(xt, src), PD_OK);
  EXPECT_VALUES(base, 0, 1.5, -2, 1.5, -2, 1.5, -2);
  assert_true(pd_tensor_version(base) > v0);
  /* src overlapping x: read whole before x is written */
  pd_tensor *r = T(PD_FLOAT32, 1, SHAPE(4), 1, 2, 3, 4);
  pd_tensor *rev = pd_flip(r, 1, SHAPE(0));
  assert_int_equal(pd_write_copy(r, rev), PD_OK);
  EXPECT_VALUES(r, 0, 4, 3, 2, 1);
  pd_tensor *bad = T(PD_FLOAT32, 1, SHAPE(3), 1, 2, 3);
  assert_int_equal(pd_write_copy(r, bad), PD_ERR_SHAPE);
  expect_last_error("copy_", "[3]");

  /* fill_: contiguous, one element, a strided view, a value the dtype lacks */
  pd_tensor *f = pd_zeros(2, SHAPE(2, 3), PD_FLOAT64);
  assert_int_equal(pd_write_fill(f, -0.5), PD_OK);
  EXPECT_VALUES(f, 0, -0.5, -0.5, -0.5, -0.5, -0.5, -0.5);
  pd_tensor *col = pd_slice(f, 1, SHAPE(1), SHAPE(1), SHAPE(2));
  assert_int_equal(pd_write_fill(col, 7), PD_OK);
  EXPECT_VALUES(f, 0, -0.5, 7, -0.5, -0.5, 7, -0.5);
  pd_tensor *one = pd_zeros(1, SHAPE(1), PD_FLOAT64);
  assert_int_equal(pd_write_fill(one, 0.125), PD_OK);
  EXPECT_VALUES(one, 0, 0.125);
  pd_tensor *i8 = pd_zeros(1, SHAPE(2), PD_INT8);
  pd_attrs a = {.f = {300}};
  pd_tensor *out[PD_MAX_OUTPUTS];
  int n_out;
  assert_int_equal(pd_dispatch(PD_OP_fill_, &i8, 1, &a, out, &n_out), PD_ERR_INVALID);
  expect_last_error("fill_: the fill value 300 is out of the range of int8", NULL);

  /* scale_ in place; a leaf that needs a gradient is refused */
  pd_tensor *s = T(PD_FLOAT32, 1, SHAPE(3), 1, -2, 4);
  assert_int_equal(pd_write_scale(s, 0.25), PD_OK);
  EXPECT_VALUES(s, 0, 0.25, -0.5, 1);
  pd_tensor_set_stop_gradient(s, false);
  assert_int_equal(pd_write_scale(s, 2), PD_ERR_STATE);
  expect_last_error("scale_", "leaf");
  pd_scope_end();
  expect_no_live_tensors();
}

/* Counts the ops a tracer sees (it lets them run). */
static int g_seen[PD_NUM_OPS];
static int count_tracer(void *ctx, pd_op_id id, pd_tensor *const *in, int n_in, const pd_attrs *a,
                        const pd_meta *meta, pd_tensor **out, int n_out, int phase) {
  (void)ctx, (void)in, (void)n_in, (void)a, (void)meta, (void)out, (void)n_out;
  if (phase == 0) g_seen[id]++;
  return 0;
}

static void test_library_writes_reach_the_tracer(void **state) {
  (void)state;
  pd_layer *lin = pd_nn_linear(3, 2, NULL);
  pd_named_tensors sd; /* borrowed references */
  assert_int_equal(pd_layer_state_dict(lin, &sd), PD_OK);
  assert_int_equal(sd.n, 2);
  pd_tensor *w = NULL, *vals[2];
  for (int i = 0; i < 2; i++) {
    vals[i] = pd_full(pd_tensor_ndim(sd.tensors[i]), pd_tensor_shape(sd.tensors[i]), 0.5, PD_FLOAT32);
    if (strcmp(sd.names[i], "weight") == 0) w = sd.tensors[i];
  }
  assert_non_null(w);
  pd_named_tensors halves = {.n = 2, .names = sd.names, .tensors = vals};
  memset(g_seen, 0, sizeof g_seen);
  pd_dispatch_set_tracer(count_tracer, NULL);
  assert_int_equal(pd_layer_set_state_dict(lin, &halves, NULL, NULL), PD_OK);
  assert_int_equal(g_seen[PD_OP_copy_], 2); /* weight and bias */
  /* an embedding's padding row starts at zero by fill_ on a view of it */
  pd_layer *emb = pd_nn_embedding(5, 3, &(pd_nn_embedding_opts){.has_padding_idx = true, .padding_idx = -2});
  assert_non_null(emb);
  assert_int_equal(g_seen[PD_OP_fill_], 1);
  pd_named_tensors ep;
  assert_int_equal(pd_layer_parameters(emb, &ep), PD_OK);
  for (int k = 0; k < 3; k++) assert_true(pd_tensor_item_at(ep.tensors[0], 3 * 3 + k) == 0.0);
  pd_named_tensors_free(&ep);
  pd_layer_release(emb);
  memset(g_seen, 0, sizeof g_seen);
  EXPECT_VALUES(w, 0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5);

  /* an optimizer step fills its rate slot with fill_; gradient merge's
   * average is scale_ */
  pd_optimizer *sgd = pd_optimizer_sgd(0.5, &w, 1, NULL);
  pd_fleet_distributed_strategy st = pd_fleet_distributed_strategy_default();
  st.gradient_merge = true;
  st.gradient_merge_configs = (pd_fleet_gradient_merge_configs){.k_steps = 2, .avg = true};
  pd_optimizer *opt = pd_fleet_distributed_optimizer(sgd, &st);
  assert_non_null(opt);
  pd_tensor *g = pd_full(2, SHAPE(3, 2), 1.0, PD_FLOAT32);
  assert_int_equal(pd_tensor_set_grad(w, g), PD_OK);
  assert_int_equal(pd_optimizer_step(opt), PD_OK); /* accumulating */
  assert_int_equal(pd_optimizer_step(opt), PD_OK); /* averages and updates */
  pd_dispatch_set_tracer(NULL, NULL);
  assert_int_equal(g_seen[PD_OP_scale_], 1);
  assert_int_equal(g_seen[PD_OP_fill_], 1);
  assert_int_equal(g_seen[PD_OP_sgd_], 1);
  EXPECT_VALUES(g, 0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5);
  EXPECT_VALUES(w, 1e-7, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25); /* 0.5 - 0.5 * 0.5 */
  pd_optimizer_release(opt);
  pd_tensor_release(g);
  pd_tensor_release(vals[0]);
  pd_tensor_release(vals[1]);
  pd_named_tensors_free(&sd);
  pd_layer_release(lin);
  expect_no_live_tensors();
}

/* DataParallel's coalesced groups: in and out of the flat buffer by copy_. */
static void test_flat_buffers_use_copy(void **state) {
  (void)state;
  pd_tensor *ts[2] = {T(PD_FLOAT32, 2, SHAPE(2, 2), 1, 2, 3, 4), T(PD_FLOAT32, 1, SHAPE(2), 5, 6)};
  memset(g_seen, 0, sizeof g_seen);
  pd_dispatch_set_tracer(count_tracer, NULL);
  pd_tensor *flat = pd_dp_flatten(ts, 2);
  assert_non_null(flat);
  EXPECT_VALUES(flat, 0, 1, 2, 3, 4, 5, 6);
  assert_int_equal(pd_write_scale(flat, 2), PD_OK);
  assert_int_equal(pd_dp_unflatten(flat, ts, 2), PD_OK);
  pd_dispatch_set_tracer(NULL, NULL);
  assert_int_equal(g_seen[PD_OP_copy_], 4);
  EXPECT_VALUES(ts[0], 0, 2, 4, 6, 8);
  EXPECT_VALUES(ts[1], 0, 10, 12);
  pd_tensor_release(flat);
  pd_tensor_release(ts[0]);
  pd_tensor_release(ts[1]);
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_copy_fill_scale),
      cmocka_unit_test(test_library_writes_reach_the_tracer),
      cmocka_unit_test(test_flat_buffers_use_copy),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
