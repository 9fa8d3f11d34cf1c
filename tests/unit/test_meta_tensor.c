/* Meta tensors, the static-graph Variables: shape (dims may be -1) and dtype
 * without storage. Geometry, name and flags read as for any tensor, data
 * reads are refused with an error, printing gives Paddle's Variable line,
 * and the dispatcher never hands one to a kernel: without a tracer the op
 * fails naming itself, with one the tracer records it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/op_registry.h"
#include "test_util.h"

static void expect_last_error(const char *frag1, const char *frag2) {
  const char *e = pd_last_error();
  if (!strstr(e, frag1) || (frag2 && !strstr(e, frag2)))
    fail_msg("error '%s' lacks '%s' or '%s'", e, frag1, frag2 ? frag2 : "");
  pd_clear_error();
}

static void test_create_and_accessors(void **state) {
  (void)state;
  pd_tensor *x = pd_tensor_new_meta(PD_FLOAT32, 2, SHAPE(-1, 13));
  assert_non_null(x);
  assert_true(pd_tensor_is_meta(x));
  assert_int_equal(pd_tensor_ndim(x), 2);
  assert_int_equal(pd_tensor_shape(x)[0], -1);
  assert_int_equal(pd_tensor_shape(x)[1], 13);
  assert_int_equal(pd_tensor_numel(x), -1);
  assert_int_equal(pd_tensor_dtype(x), PD_FLOAT32);
  assert_true(pd_tensor_stop_gradient(x));
  pd_tensor_set_stop_gradient(x, false);
  assert_false(pd_tensor_stop_gradient(x));
  pd_tensor_set_name(x, "x");
  assert_string_equal(pd_tensor_name(x), "x");
  assert_int_equal(pd_tensor_version(x), 0);
  assert_true(pd_tensor_is_leaf(x));
  assert_true(pd_tensor_is_contiguous(x));
  assert_ptr_equal(pd_tensor_retain(x), x);
  pd_tensor_release(x);

  pd_tensor *k = pd_tensor_new_meta(PD_INT64, 3, SHAPE(2, 3, 4));
  assert_int_equal(pd_tensor_numel(k), 24);
  assert_false(pd_tensor_shares_storage(x, k)); /* neither has storage */
  assert_false(pd_tensor_shares_storage(k, k));
  pd_tensor *s = pd_tensor_new_meta(PD_FLOAT64, 0, NULL);
  assert_int_equal(pd_tensor_numel(s), 1);

  pd_tensor *plain = pd_ones(1, SHAPE(2), PD_FLOAT32);
  assert_false(pd_tensor_is_meta(plain));
  assert_false(pd_tensor_is_meta(NULL));
  pd_tensor_release(plain);
  pd_tensor_release(s);
  pd_tensor_release(k);
  pd_tensor_release(x);
  expect_no_live_tensors();
}

static void test_bad_meta_arguments(void **state) {
  (void)state;
  assert_null(pd_tensor_new_meta(PD_FLOAT32, 2, SHAPE(-2, 3)));
  expect_last_error("tensor_new_meta", "-2");
  assert_null(pd_tensor_new_meta(PD_FLOAT32, PD_MAX_DIMS + 1, SHAPE(1, 1, 1, 1, 1, 1, 1, 1, 1, 1)));
  expect_last_error("tensor_new_meta: rank", NULL);
  assert_null(pd_tensor_new_meta(PD_FLOAT32, 2, NULL));
  expect_last_error("NULL shape", NULL);
  assert_null(pd_tensor_new_meta((pd_dtype)99, 1, SHAPE(3)));
  expect_last_error("invalid dtype 99", NULL);
  assert_null(pd_tensor_new_meta(PD_FLOAT32, 2, SHAPE(INT64_MAX, 4)));
  expect_last_error("tensor_new_meta", "INT64_MAX");
}

static void test_data_reads_are_refused(void **state) {
  (void)state;
  pd_tensor *x = pd_tensor_new_meta(PD_FLOAT32, 2, SHAPE(-1, 13));
  pd_tensor_set_name(x, "feat");
  assert_null(pd_tensor_data(x));
  expect_last_error("tensor_data: tensor 'feat' is a static Variable (shape [-1, 13], float32)", "no data");
  assert_true(isnan(pd_tensor_item(x)));
  expect_last_error("item", "static Variable");
  assert_true(isnan(pd_tensor_item_at(x, 0)));
  expect_last_error("item", "static Variable");
  float buf[4];
  assert_true(pd_tensor_copy_to(x, buf, 4, PD_FLOAT32) < 0);
  expect_last_error("copy_to", "static Variable");

  char *str = pd_tensor_to_string(x);
  assert_string_equal(str, "var feat : LOD_TENSOR.shape(-1, 13).dtype(float32).stop_gradient(True)");
  free(str);
  pd_tensor *s = pd_tensor_new_meta(PD_INT64, 0, NULL);
  str = pd_tensor_to_string(s);
  assert_string_equal(str, "var (unnamed) : LOD_TENSOR.shape().dtype(int64).stop_gradient(True)");
  free(str);

  /* a meta gradient (what a Program's backward declares) is cleared, not zeroed */
  pd_tensor *g = pd_tensor_new_meta(PD_FLOAT32, 2, SHAPE(-1, 13));
  assert_int_equal(pd_tensor_set_grad(x, g), PD_OK);
  pd_tensor_clear_grad(x, true);
  assert_null(pd_tensor_grad(x));
  pd_tensor_release(g);
  pd_tensor_release(s);
  pd_tensor_release(x);
  assert_int_equal(pd_last_status(), PD_OK);
  expect_no_live_tensors();
}

/* The public functions outside ops that read or write data refuse a
 * Variable instead of touching its missing storage. */
static void test_data_users_refuse_variables(void **state) {
  (void)state;
  pd_tensor *x = pd_tensor_new_meta(PD_FLOAT32, 2, SHAPE(4, 3));
  pd_tensor_set_name(x, "w");
  assert_int_equal(pd_io_save_npy("unused.npy", x), PD_ERR_STATE);
  expect_last_error("static Variable", NULL);
  char *names[] = {"w"};
  pd_named_tensors sd = {.n = 1, .names = names, .tensors = &x};
  assert_int_equal(pd_save(&sd, "unused.pdparams"), PD_ERR_STATE);
  expect_last_error("save: tensor 'w' is a static Variable", NULL);
  pd_initializer c = pd_nn_initializer_constant(1.0);
  assert_int_equal(pd_initializer_apply(&c, x), PD_ERR_STATE);
  expect_last_error("initializer: tensor 'w' is a static Variable", NULL);
  pd_layer *lin = pd_nn_linear(3, 4, NULL);
  names[0] = "weight";
  assert_int_equal(pd_layer_set_state_dict(lin, &sd, NULL, NULL), PD_ERR_STATE);
  expect_last_error("set_state_dict: tensor 'w' is a static Variable", NULL);
  pd_layer_release(lin);
  /* a collective refuses it before looking for a group */
  assert_true(pd_dist_all_reduce(x, PD_REDUCE_SUM, NULL) < 0);
  expect_last_error("all_reduce: tensor 'w' is a static Variable", NULL);
  pd_tensor_release(x);
  expect_no_live_tensors();
}

static void test_dispatch_without_tracer_fails(void **state) {
  (void)state;
  pd_tensor *x = pd_tensor_new_meta(PD_FLOAT32, 2, SHAPE(-1, 13));
  pd_tensor *w = pd_ones(2, SHAPE(13, 1), PD_FLOAT32);
  pd_tensor_set_name(x, "x");
  expect_error(pd_matmul(w, x, false, false), "matmul: input 1 ('x', shape [-1, 13]) is a static Variable",
               "no tracer is installed");
  pd_clear_error();
  expect_error(pd_relu(x), "relu: input 0", "static Variable with no data");
  pd_clear_error();
  /* an input the dispatcher would first convert (int to float) fails the same */
  pd_tensor *i = pd_tensor_new_meta(PD_INT32, 1, SHAPE(-1));
  expect_error(pd_sqrt(i), "sqrt: input 0", "static Variable");
  pd_clear_error();
  /* the optimizer's trusted path too */
  bool prev = pd_grad_mode_set(false);
  assert_int_equal(pd_dispatch_inplace_trusted(PD_OP_relu_, &x, 1, NULL), PD_ERR_STATE);
  expect_last_error("relu_: input 0", "static Variable");
  pd_grad_mode_set(prev);
  pd_tensor_release(i);
  pd_tensor_release(w);
  pd_tensor_release(x);
  expect_no_live_tensors();
}

/* A tracer as a Program builder uses it: ops on meta inputs are recorded
 * (here: counted) and get meta outputs of the inferred shapes. */
typedef struct {
  int recorded;
  bool refuse; /* behave as a broken tracer that records nothing */
} rec;

static int recording_tracer(void *ctx, pd_op_id id, pd_tensor *const *in, int n_in, const pd_attrs *a,
                            const pd_meta *meta, pd_tensor **out, int n_out, int phase) {
  (void)id, (void)a;
  rec *r = ctx;
  bool any = false;
  for (int i = 0; i < n_in; i++) any |= pd_tensor_is_meta(in[i]);
  if (phase != 0 || !any || r->refuse) return 0;
  for (int k = 0; k < n_out; k++) out[k] = pd_tensor_new_meta(meta[k].dtype, meta[k].ndim, meta[k].shape);
  r->recorded++;
  return 1;
}

static void test_tracer_records_instead_of_running(void **state) {
  (void)state;
  pd_tensor *x = pd_tensor_new_meta(PD_FLOAT32, 2, SHAPE(-1, 13));
  pd_tensor *w = pd_ones(2, SHAPE(13, 1), PD_FLOAT32);
  pd_tensor *b = pd_ones(1, SHAPE(1), PD_FLOAT32);
  rec r = {0};
  pd_dispatch_set_tracer(recording_tracer, &r);
  pd_tensor *y = pd_matmul(x, w, false, false);
  pd_tensor *z = pd_add(y, b);
  pd_tensor *i = pd_tensor_new_meta(PD_INT32, 1, SHAPE(-1));
  pd_tensor *s = pd_sqrt(i); /* its cast to float32 is recorded too */
  assert_int_equal(r.recorded, 4);
  assert_true(pd_tensor_is_meta(y) && pd_tensor_is_meta(z) && pd_tensor_is_meta(s));
  expect_shape(z, 2, SHAPE(-1, 1));
  assert_int_equal(pd_tensor_dtype(s), PD_FLOAT32);
  /* plain tensors still run */
  pd_tensor *p = pd_add(w, w);
  assert_false(pd_tensor_is_meta(p));
  assert_float_equal(((float *)pd_tensor_data(p))[0], 2.0f, 0);
  /* a tracer that lets an op on a Variable through: the kernel is not run */
  r.refuse = true;
  expect_error(pd_relu(z), "relu: input 0 is a static Variable (shape [-1, 1])", "did not record");
  pd_clear_error();
  pd_dispatch_set_tracer(NULL, NULL);
  pd_tensor *all[] = {x, w, b, y, z, i, s, p};
  for (size_t k = 0; k < sizeof all / sizeof *all; k++) pd_tensor_release(all[k]);
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_create_and_accessors),
      cmocka_unit_test(test_bad_meta_arguments),
      cmocka_unit_test(test_data_reads_are_refused),
      cmocka_unit_test(test_data_users_refuse_variables),
      cmocka_unit_test(test_dispatch_without_tracer_fails),
      cmocka_unit_test(test_tracer_records_instead_of_running),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
