/* Startup programs: parameters created while a Program is being built get
 * their initializers recorded as random ops (uniform, gaussian, full, ...),
 * and running the startup program after the same pd_seed gives the values
 * eager initialisation gives. */
#include <stdlib.h>
#include <string.h>

#include "paddlec/static.h"
#include "static/static_internal.h"
#include "test_util.h"

static bool has_op(const pd_program *p, const char *type) {
  pd_static_block *b = pd_program_global_block((pd_program *)p);
  for (int i = 0; i < pd_static_block_num_ops(b); i++)
    if (strcmp(pd_static_block_op_type(b, i), type) == 0) return true;
  return false;
}

/* A Linear and a Conv2D built eagerly and under program_guard after the
 * same seed: the startup program draws with uniform ops and fills the
 * biases with full; run after that seed again, the scope holds the eager
 * values bit for bit. */
static void test_layers_startup_equals_eager(void **state) {
  (void)state;
  pd_seed(11);
  pd_layer *el = pd_nn_linear(5, 4, NULL), *ec = pd_nn_conv2d(2, 3, 1, SHAPE(3), NULL);
  pd_named_tensors eager_l, eager_c;
  assert_int_equal(pd_layer_parameters(el, &eager_l), PD_OK);
  assert_int_equal(pd_layer_parameters(ec, &eager_c), PD_OK);

  pd_program *main = pd_static_program(), *startup = pd_static_program();
  pd_seed(11);
  assert_int_equal(pd_static_program_guard_begin(main, startup), PD_OK);
  pd_layer *sl = pd_nn_linear(5, 4, NULL), *sc = pd_nn_conv2d(2, 3, 1, SHAPE(3), NULL);
  pd_tensor *x = pd_static_data("x", 2, SHAPE(-1, 5), PD_FLOAT32);
  pd_tensor *img = pd_static_data("img", 4, SHAPE(-1, 2, 6, 6), PD_FLOAT32);
  pd_tensor *y = pd_layer_call1(sl, x), *z = pd_layer_call1(sc, img);
  assert_non_null(y);
  assert_non_null(z);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  /* the initializers are ops now, not constants */
  assert_true(has_op(startup, "uniform"));
  assert_true(has_op(startup, "full"));
  assert_false(has_op(startup, "assign_value"));
  pd_named_tensors static_l, static_c;
  assert_int_equal(pd_layer_parameters(sl, &static_l), PD_OK);
  assert_int_equal(pd_layer_parameters(sc, &static_c), PD_OK);
  pd_static_var_info info;
  assert_int_equal(pd_program_var_info(startup, pd_tensor_name(static_l.tensors[0]), &info), PD_OK);
  assert_true(info.persistable && info.is_parameter);

  pd_executor *exe = pd_static_executor(PD_CPU);
  pd_var_scope *scope = pd_static_scope();
  pd_seed(11);
  assert_int_equal(pd_executor_run(exe, startup, NULL, 0, NULL, 0, NULL, scope), PD_OK);
  for (int k = 0; k < 2; k++) {
    pd_named_tensors *e = k ? &eager_c : &eager_l, *s = k ? &static_c : &static_l;
    assert_int_equal(e->n, s->n);
    for (int i = 0; i < e->n; i++) {
      pd_tensor *v = pd_var_scope_find_var(scope, pd_tensor_name(s->tensors[i]));
      assert_non_null(v);
      assert_true(same_bits(v, e->tensors[i]));
      assert_true(same_bits(s->tensors[i], e->tensors[i])); /* the layer's own eager value too */
    }
  }
  /* another seed draws other numbers: the values come from the run */
  pd_seed(12);
  assert_int_equal(pd_executor_run(exe, startup, NULL, 0, NULL, 0, NULL, scope), PD_OK);
  assert_false(
      same_bits(pd_var_scope_find_var(scope, pd_tensor_name(static_l.tensors[0])), eager_l.tensors[0]));

  pd_tensor *ts[] = {x, img, y, z};
  for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) pd_tensor_release(ts[i]);
  pd_named_tensors *all[] = {&eager_l, &eager_c, &static_l, &static_c};
  for (int i = 0; i < 4; i++) pd_named_tensors_free(all[i]);
  pd_layer *ls[] = {el, ec, sl, sc};
  for (int i = 0; i < 4; i++) pd_layer_release(ls[i]);
  pd_var_scope_release(scope);
  pd_executor_release(exe);
  pd_program_release(main);
  pd_program_release(startup);
}

/* create_parameter with Normal in float64 and Uniform in float16: gaussian
 * and scale ops, uniform then a cast; each equal to the eager draw. */
static void test_create_parameter_initializers(void **state) {
  (void)state;
  pd_initializer normal = pd_nn_initializer_normal(1.0, 2.0), uni = pd_nn_initializer_uniform(-3, 3);
  pd_seed(5);
  pd_tensor *en = pd_tensor_new(PD_FLOAT64, 2, SHAPE(3, 4)), *eu = pd_tensor_new(PD_FLOAT16, 1, SHAPE(7));
  assert_int_equal(pd_initializer_apply(&normal, en), PD_OK);
  assert_int_equal(pd_initializer_apply(&uni, eu), PD_OK);

  pd_program *main = pd_static_program(), *startup = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(main, startup), PD_OK);
  pd_tensor *w = pd_static_create_parameter(2, SHAPE(3, 4), PD_FLOAT64, "w_normal", &normal, false);
  pd_tensor *h = pd_static_create_parameter(1, SHAPE(7), PD_FLOAT16, "w_half", &uni, false);
  assert_non_null(w);
  assert_non_null(h);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  assert_true(has_op(startup, "gaussian"));
  assert_true(has_op(startup, "scale"));
  assert_true(has_op(startup, "cast"));
  char *text = pd_program_to_string(startup);
  assert_non_null(strstr(text, "w_normal"));
  free(text);

  pd_executor *exe = pd_static_executor(PD_CPU);
  pd_var_scope *scope = pd_static_scope();
  pd_seed(5);
  assert_int_equal(pd_executor_run(exe, startup, NULL, 0, NULL, 0, NULL, scope), PD_OK);
  assert_true(same_bits(pd_var_scope_find_var(scope, "w_normal"), en));
  assert_true(same_bits(pd_var_scope_find_var(scope, "w_half"), eu));
  pd_tensor *ts[] = {en, eu, w, h};
  for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) pd_tensor_release(ts[i]);
  pd_var_scope_release(scope);
  pd_executor_release(exe);
  pd_program_release(main);
  pd_program_release(startup);
}

/* TruncatedNormal is the truncated_gaussian_random op (drawn in float64,
 * then a cast): run after the same seed the startup program gives the
 * eager draw bit for bit, float32 and float64, the mirrored case (both
 * cut-offs above the mean) and std 0 (nothing drawn) included. */
static void test_truncated_normal_is_an_op(void **state) {
  (void)state;
  pd_initializer tn = pd_nn_initializer_truncated_normal(0.5, 2, -1, 3);
  pd_initializer upper = pd_nn_initializer_truncated_normal(0, 1, 0.5, 3);
  pd_initializer flat = pd_nn_initializer_truncated_normal(5, 0, -1, 1);
  pd_seed(21);
  pd_tensor *e32 = pd_zeros(2, SHAPE(5, 7), PD_FLOAT32), *e64 = pd_zeros(1, SHAPE(9), PD_FLOAT64);
  pd_tensor *eflat = pd_zeros(1, SHAPE(3), PD_FLOAT64);
  assert_int_equal(pd_initializer_apply(&tn, e32), PD_OK);
  assert_int_equal(pd_initializer_apply(&upper, e64), PD_OK);
  assert_int_equal(pd_initializer_apply(&flat, eflat), PD_OK);
  EXPECT_VALUES(eflat, 0, 1, 1, 1);
  const double *d = pd_tensor_data(e64);
  for (int i = 0; i < 9; i++) assert_true(d[i] >= 0.5 && d[i] <= 3);

  pd_program *main = pd_static_program(), *startup = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(main, startup), PD_OK);
  pd_tensor *w[3] = {
      pd_static_create_parameter(2, SHAPE(5, 7), PD_FLOAT32, "w_trunc", &tn, false),
      pd_static_create_parameter(1, SHAPE(9), PD_FLOAT64, "w_upper", &upper, false),
      pd_static_create_parameter(1, SHAPE(3), PD_FLOAT64, "w_flat", &flat, false),
  };
  for (int i = 0; i < 3; i++) assert_non_null(w[i]);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  assert_true(has_op(startup, "truncated_gaussian_random"));
  assert_true(has_op(startup, "cast"));
  assert_false(has_op(startup, "assign_value"));

  pd_executor *exe = pd_static_executor(PD_CPU);
  pd_var_scope *scope = pd_static_scope();
  pd_seed(21);
  assert_int_equal(pd_executor_run(exe, startup, NULL, 0, NULL, 0, NULL, scope), PD_OK);
  assert_true(same_bits(pd_var_scope_find_var(scope, "w_trunc"), e32));
  assert_true(same_bits(pd_var_scope_find_var(scope, "w_upper"), e64));
  assert_true(same_bits(pd_var_scope_find_var(scope, "w_flat"), eflat));
  pd_seed(22); /* the values come from the run */
  assert_int_equal(pd_executor_run(exe, startup, NULL, 0, NULL, 0, NULL, scope), PD_OK);
  assert_false(same_bits(pd_var_scope_find_var(scope, "w_trunc"), e32));
  pd_tensor *ts[] = {e32, e64, eflat, w[0], w[1], w[2]};
  for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) pd_tensor_release(ts[i]);
  pd_var_scope_release(scope);
  pd_executor_release(exe);
  pd_program_release(main);
  pd_program_release(startup);
}

/* What stays a value: Assign (a given value: an assign_value of the
 * startup program, as Paddle's Assign initializer records) and a parameter
 * created before the guard (its value exists already). */
static void test_given_values_stay_assign_value(void **state) {
  (void)state;
  pd_tensor *given = T(PD_FLOAT32, 2, SHAPE(2, 2), 1, -2, 3.5, 4);
  pd_initializer as = pd_nn_initializer_assign(given);
  pd_layer *before = pd_nn_linear(2, 2, NULL);
  pd_program *main = pd_static_program(), *startup = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(main, startup), PD_OK);
  pd_tensor *w = pd_static_create_parameter(2, SHAPE(2, 2), PD_FLOAT32, "w_assign", &as, false);
  pd_tensor *x = pd_static_data("x", 2, SHAPE(-1, 2), PD_FLOAT32);
  pd_tensor *y = pd_layer_call1(before, x), *z = pd_matmul(y, w, false, false);
  assert_non_null(z);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  assert_true(has_op(startup, "assign_value"));
  assert_false(has_op(startup, "uniform"));

  pd_executor *exe = pd_static_executor(PD_CPU);
  pd_var_scope *scope = pd_static_scope();
  assert_int_equal(pd_executor_run(exe, startup, NULL, 0, NULL, 0, NULL, scope), PD_OK);
  assert_true(same_bits(pd_var_scope_find_var(scope, "w_assign"), given));
  pd_named_tensors ps;
  assert_int_equal(pd_layer_parameters(before, &ps), PD_OK);
  assert_true(same_bits(pd_var_scope_find_var(scope, pd_tensor_name(ps.tensors[0])), ps.tensors[0]));
  pd_named_tensors_free(&ps);
  pd_tensor *ts[] = {given, w, x, y, z};
  for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) pd_tensor_release(ts[i]);
  pd_layer_release(before);
  pd_var_scope_release(scope);
  pd_executor_release(exe);
  pd_program_release(main);
  pd_program_release(startup);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_layers_startup_equals_eager),
      cmocka_unit_test(test_create_parameter_initializers),
      cmocka_unit_test(test_truncated_normal_is_an_op),
      cmocka_unit_test(test_given_values_stay_assign_value),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
