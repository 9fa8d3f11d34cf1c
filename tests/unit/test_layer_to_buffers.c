/* A layer holding non-parameter tensors (the seed's RotaryEmbedding tables)
 * as buffers, persistable or not; Layer.to(dtype) / astype on parameters and
 * buffers; Tensor.astype. */
#include <string.h>

#include "test_util.h"

/* A rotary-like layer: out = x * cos_cached[:n] + bias, with a
 * non-persistable table and a persistable step counter. */
typedef struct {
  pd_layer base;
  pd_tensor *bias; /* borrowed parameter */
} rot;

static int rot_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  (void)n_in;
  (void)max_out;
  rot *r = (rot *)self;
  pd_tensor *c = pd_layer_buffer(self, "cos_cached");
  out[0] = pd_add(pd_multiply(in[0], c), r->bias); /* the temporary belongs to call's scope */
  return out[0] ? 1 : pd_last_status();
}
static const pd_layer_type rot_type = {"Rot", rot_forward, NULL, NULL};

static rot *rot_new(void) {
  rot *r = pd_layer_new(sizeof *r, &rot_type);
  pd_tensor *cos = T(PD_FLOAT32, 1, SHAPE(3), 0.5, 0.25, 2);
  pd_tensor *steps = pd_zeros(1, SHAPE(1), PD_INT64);
  assert_int_equal(pd_layer_register_buffer(&r->base, "cos_cached", cos, false), PD_OK);
  assert_int_equal(pd_layer_register_buffer(&r->base, "steps", steps, true), PD_OK);
  pd_tensor_release(cos);
  pd_tensor_release(steps);
  pd_initializer one = pd_nn_initializer_constant(1.0);
  r->bias = pd_layer_create_parameter(&r->base, "bias", 1, SHAPE(3), PD_FLOAT32, NULL, &one, true);
  assert_non_null(r->bias);
  return r;
}

static void test_non_persistable_buffer(void **state) {
  (void)state;
  rot *r = rot_new();
  pd_named_tensors sd = {0}, bufs = {0};
  assert_int_equal(pd_layer_state_dict(&r->base, &sd), PD_OK);
  assert_int_equal(sd.n, 2); /* bias and the persistable steps; not cos_cached */
  assert_string_equal(sd.names[0], "bias");
  assert_string_equal(sd.names[1], "steps");
  assert_int_equal(pd_layer_named_buffers(&r->base, &bufs), PD_OK);
  assert_int_equal(bufs.n, 2);
  assert_string_equal(bufs.names[0], "cos_cached");
  assert_true(pd_tensor_stop_gradient(bufs.tensors[0]));
  pd_named_tensors_free(&sd);
  pd_named_tensors_free(&bufs);
  pd_tensor *x = T(PD_FLOAT32, 1, SHAPE(3), 2, 4, 1);
  pd_tensor *y = pd_layer_call1(&r->base, x);
  EXPECT_VALUES(y, 0, 2, 2, 3);
  pd_tensor_release(y);
  pd_tensor_release(x);
  pd_layer_release(&r->base);
  expect_no_live_tensors();
}

static void test_layer_to_float64(void **state) {
  (void)state;
  rot *r = rot_new();
  pd_tensor *bias = r->bias;
  pd_tensor *x = T(PD_FLOAT32, 1, SHAPE(3), 2, 4, 1);
  pd_tensor *o = pd_layer_call1(&r->base, x), *y = pd_sum(o, NULL, 0, false);
  assert_int_equal(pd_backward(y, NULL, false), PD_OK);
  assert_non_null(pd_tensor_grad(bias));
  pd_tensor_release(o);
  pd_tensor_release(y);
  pd_tensor_release(x);

  assert_int_equal(pd_layer_to(&r->base, PD_FLOAT64), PD_OK);
  /* the same objects, now float64, values kept, gradient dropped */
  assert_ptr_equal(pd_layer_parameter(&r->base, "bias"), bias);
  assert_int_equal(pd_tensor_dtype(bias), PD_FLOAT64);
  EXPECT_VALUES(bias, 0, 1, 1, 1);
  assert_null(pd_tensor_grad(bias));
  assert_false(pd_tensor_stop_gradient(bias));
  assert_non_null(pd_tensor_param_info(bias));
  pd_tensor *cos = pd_layer_buffer(&r->base, "cos_cached");
  assert_int_equal(pd_tensor_dtype(cos), PD_FLOAT64);
  EXPECT_VALUES(cos, 0, 0.5, 0.25, 2);
  /* every buffer, as Paddle's to(): the int64 counter too */
  assert_int_equal(pd_tensor_dtype(pd_layer_buffer(&r->base, "steps")), PD_FLOAT64);

  /* it trains in float64 */
  x = T(PD_FLOAT64, 1, SHAPE(3), 2, 4, 1);
  o = pd_layer_call1(&r->base, x);
  y = pd_sum(o, NULL, 0, false);
  assert_int_equal(pd_tensor_dtype(y), PD_FLOAT64);
  assert_true(pd_tensor_item(y) == 1 + 1 + 2 + 3);
  assert_int_equal(pd_backward(y, NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(bias), 0, 1, 1, 1);
  assert_int_equal(pd_tensor_dtype(pd_tensor_grad(bias)), PD_FLOAT64);
  pd_tensor_release(o);
  pd_tensor_release(y);
  pd_tensor_release(x);

  /* astype back to float32 */
  assert_int_equal(pd_layer_astype(&r->base, PD_FLOAT32), PD_OK);
  assert_int_equal(pd_tensor_dtype(bias), PD_FLOAT32);
  assert_int_equal(pd_tensor_dtype(pd_layer_buffer(&r->base, "cos_cached")), PD_FLOAT32);
  pd_layer_release(&r->base);
  expect_no_live_tensors();
}

static void test_layer_to_sublayers_and_errors(void **state) {
  (void)state;
  pd_layer *seq =
      pd_nn_sequential((pd_layer *[]){pd_nn_linear(2, 3, NULL), pd_nn_layer_norm(1, SHAPE(3), NULL)}, 2);
  assert_non_null(seq);
  assert_int_equal(pd_layer_to(seq, PD_FLOAT64), PD_OK);
  pd_named_tensors ps = {0};
  assert_int_equal(pd_layer_named_parameters(seq, &ps), PD_OK);
  assert_int_equal(ps.n, 4);
  for (int i = 0; i < ps.n; i++) assert_int_equal(pd_tensor_dtype(ps.tensors[i]), PD_FLOAT64);
  pd_named_tensors_free(&ps);
  /* parameters cannot become integers: an error, nothing changed */
  assert_int_equal(pd_layer_to(seq, PD_INT32), PD_ERR_DTYPE);
  assert_non_null(strstr(pd_last_error(), "Layer.to"));
  assert_non_null(strstr(pd_last_error(), "int32"));
  assert_int_equal(pd_layer_named_parameters(seq, &ps), PD_OK);
  for (int i = 0; i < ps.n; i++) assert_int_equal(pd_tensor_dtype(ps.tensors[i]), PD_FLOAT64);
  pd_named_tensors_free(&ps);
  assert_int_equal(pd_layer_to(seq, (pd_dtype)42), PD_ERR_DTYPE);
  assert_int_equal(pd_layer_to(NULL, PD_FLOAT32), PD_ERR_INVALID);
  pd_clear_error();
  pd_layer_release(seq);
  expect_no_live_tensors();
}

static void test_tensor_astype(void **state) {
  (void)state;
  pd_tensor *x = T(PD_FLOAT32, 1, SHAPE(3), 1.5, -2.5, 3);
  pd_tensor_set_stop_gradient(x, false);
  pd_tensor *i = pd_tensor_astype(x, PD_INT32);
  assert_int_equal(pd_tensor_dtype(i), PD_INT32);
  EXPECT_VALUES(i, 0, 1, -2, 3);
  pd_tensor *d = pd_tensor_astype(x, PD_FLOAT64);
  pd_tensor *dd = pd_multiply(d, d), *s = pd_sum(dd, NULL, 0, false);
  assert_int_equal(pd_backward(s, NULL, false), PD_OK);
  pd_tensor_release(dd);
  EXPECT_VALUES(pd_tensor_grad(x), 0, 3, -5, 6);
  assert_int_equal(pd_tensor_dtype(pd_tensor_grad(x)), PD_FLOAT32);
  pd_tensor_release(s);
  pd_tensor_release(d);
  pd_tensor_release(i);
  pd_tensor_release(x);
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_non_persistable_buffer),
      cmocka_unit_test(test_layer_to_float64),
      cmocka_unit_test(test_layer_to_sublayers_and_errors),
      cmocka_unit_test(test_tensor_astype),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
