/* Containers: Sequential, LayerList, ParameterList, LayerDict. Parameter
 * names and shapes, chained forward against a naive computation, index
 * access, insertion/deletion renaming as Paddle does, bad inputs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

static void expect_status_error(pd_status st, const char *f1, const char *f2) {
  if (st == PD_OK) fail_msg("expected an error (%s)", f1);
  expect_error(NULL, f1, f2);
}

/* out_features of a Linear(in, out) from its weight [in, out]. */
static int64_t out_features(const pd_layer *l) { return pd_tensor_shape(pd_layer_parameter(l, "weight"))[1]; }

static void test_sequential_parameters_and_forward(void **state) {
  (void)state;
  pd_seed(3);
  pd_layer *layers[] = {pd_nn_linear(4, 3, NULL), pd_nn_relu(), pd_nn_linear(3, 2, NULL)};
  pd_layer *seq = pd_nn_sequential(layers, 3);
  assert_non_null(seq);
  assert_int_equal(pd_nn_sequential_len(seq), 3);
  assert_ptr_equal(pd_nn_sequential_get(seq, 0), layers[0]);
  assert_ptr_equal(pd_nn_sequential_get(seq, -1), layers[2]);
  assert_ptr_equal(pd_layer_sublayer(seq, "1"), layers[1]);

  pd_named_tensors ps;
  assert_int_equal(pd_layer_named_parameters(seq, &ps), PD_OK);
  assert_int_equal(ps.n, 4);
  const char *names[] = {"0.weight", "0.bias", "2.weight", "2.bias"};
  const int64_t shapes[][2] = {{4, 3}, {3, 0}, {3, 2}, {2, 0}};
  for (int i = 0; i < 4; i++) {
    assert_string_equal(ps.names[i], names[i]);
    expect_shape(ps.tensors[i], shapes[i][1] ? 2 : 1, shapes[i]);
  }
  pd_named_tensors_free(&ps);

  pd_scope_begin();
  pd_tensor *x = pd_randn(2, SHAPE(5, 4), PD_FLOAT32);
  pd_tensor *y = pd_layer_call1(seq, x);
  expect_shape(y, 2, SHAPE(5, 2));
  pd_tensor *w0 = pd_layer_parameter(layers[0], "weight"), *b0 = pd_layer_parameter(layers[0], "bias");
  pd_tensor *w2 = pd_layer_parameter(layers[2], "weight"), *b2 = pd_layer_parameter(layers[2], "bias");
  double want[10];
  for (int r = 0; r < 5; r++) {
    double h[3];
    for (int j = 0; j < 3; j++) {
      double s = pd_tensor_item_at(b0, j);
      for (int k = 0; k < 4; k++) s += pd_tensor_item_at(x, r * 4 + k) * pd_tensor_item_at(w0, k * 3 + j);
      h[j] = s > 0 ? s : 0;
    }
    for (int j = 0; j < 2; j++) {
      double s = pd_tensor_item_at(b2, j);
      for (int k = 0; k < 3; k++) s += h[k] * pd_tensor_item_at(w2, k * 2 + j);
      want[r * 2 + j] = s;
    }
  }
  expect_values(y, want, 10, 1e-5);
  /* gradients reach the first layer through the chain */
  assert_int_equal(pd_backward(pd_sum(y, NULL, 0, false), NULL, false), PD_OK);
  assert_non_null(pd_tensor_grad(w0));
  pd_scope_end();

  char *s = pd_layer_to_string(seq);
  assert_non_null(strstr(s, "Sequential(\n  (0): Linear(in_features=4, out_features=3, dtype=float32)\n"));
  assert_non_null(strstr(s, "  (1): ReLU()\n"));
  free(s);

  assert_null(pd_nn_sequential_get(seq, 3));
  expect_error(NULL, "Sequential.get", "index 3 is out of range for length 3");
  assert_null(pd_nn_sequential_get(seq, -4));
  expect_error(NULL, "Sequential.get", "-4");
  pd_layer_release(seq);
  expect_no_live_tensors();
}

static void test_sequential_named_empty_and_errors(void **state) {
  (void)state;
  const char *names[] = {"fc", "act"};
  pd_layer *seq = pd_nn_sequential_named(names, (pd_layer *[]){pd_nn_linear(2, 2, NULL), pd_nn_tanh()}, 2);
  assert_non_null(seq);
  pd_named_tensors sd;
  assert_int_equal(pd_layer_state_dict(seq, &sd), PD_OK);
  assert_int_equal(sd.n, 2);
  assert_string_equal(sd.names[0], "fc.weight");
  assert_string_equal(sd.names[1], "fc.bias");
  pd_named_tensors_free(&sd);
  assert_ptr_equal(pd_nn_sequential_get(seq, 1), pd_layer_sublayer(seq, "act"));
  pd_layer_release(seq);

  /* an empty Sequential returns its input */
  pd_layer *empty = pd_nn_sequential(NULL, 0);
  assert_int_equal(pd_nn_sequential_len(empty), 0);
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT32, 1, SHAPE(3), 1, 2, 3);
  pd_tensor *y = pd_layer_call1(empty, x);
  EXPECT_VALUES(y, 0, 1, 2, 3);
  pd_scope_end();
  pd_layer_release(empty);

  /* bad inputs: the given layers are released, nothing leaks */
  assert_null(pd_nn_sequential((pd_layer *[]){pd_nn_relu(), NULL}, 2));
  expect_error(NULL, "Sequential", "layer 1 is NULL");
  assert_null(
      pd_nn_sequential_named((const char *[]){"a", "a"}, (pd_layer *[]){pd_nn_relu(), pd_nn_tanh()}, 2));
  expect_error(NULL, "Sequential", "'a' is given twice");
  assert_null(pd_nn_sequential_named((const char *[]){"a.b"}, (pd_layer *[]){pd_nn_relu()}, 1));
  expect_error(NULL, "a.b", NULL);
  pd_layer *list = pd_nn_layer_list(NULL, 0);
  assert_null(pd_nn_sequential_get(list, 0));
  expect_error(NULL, "expects a Sequential", "got a LayerList");
  assert_true(pd_nn_sequential_len(list) < 0);
  pd_clear_error();
  pd_layer_release(list);
  expect_no_live_tensors();
}

static void test_sequential_train_eval_propagates(void **state) {
  (void)state;
  pd_layer *seq = pd_nn_sequential((pd_layer *[]){pd_nn_dropout(0.5, NULL), pd_nn_identity()}, 2);
  pd_layer_eval(seq);
  assert_false(pd_nn_sequential_get(seq, 0)->training);
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT32, 1, SHAPE(4), 1, 2, 3, 4);
  EXPECT_VALUES(pd_layer_call1(seq, x), 0, 1, 2, 3, 4); /* eval dropout: identity */
  pd_scope_end();
  pd_layer_train(seq);
  assert_true(pd_nn_sequential_get(seq, 0)->training);
  pd_layer_release(seq);
  expect_no_live_tensors();
}

static void test_layer_list(void **state) {
  (void)state;
  pd_layer *list = pd_nn_layer_list((pd_layer *[]){pd_nn_linear(1, 1, NULL), pd_nn_linear(1, 2, NULL)}, 2);
  assert_int_equal(pd_nn_layer_list_append(list, pd_nn_linear(1, 3, NULL)), PD_OK);
  assert_int_equal(pd_nn_layer_list_len(list), 3);
  /* insert shifts the later items up and renames them "i+1" */
  assert_int_equal(pd_nn_layer_list_insert(list, 1, pd_nn_linear(1, 5, NULL)), PD_OK);
  assert_int_equal(pd_nn_layer_list_insert(list, -1, pd_nn_linear(1, 7, NULL)), PD_OK);
  const int64_t order[] = {1, 5, 2, 7, 3};
  assert_int_equal(pd_nn_layer_list_len(list), 5);
  for (int i = 0; i < 5; i++) assert_int_equal(out_features(pd_nn_layer_list_get(list, i)), order[i]);
  assert_int_equal(out_features(pd_nn_layer_list_get(list, -5)), 1);
  pd_named_tensors ps;
  assert_int_equal(pd_layer_named_parameters(list, &ps), PD_OK);
  assert_int_equal(ps.n, 10);
  for (int i = 0; i < 5; i++) {
    char want[16];
    snprintf(want, sizeof want, "%d.weight", i);
    assert_string_equal(ps.names[2 * i], want);
    assert_int_equal(pd_tensor_shape(ps.tensors[2 * i])[1], order[i]);
  }
  pd_named_tensors_free(&ps);

  /* set replaces, delete shifts down */
  assert_int_equal(pd_nn_layer_list_set(list, -1, pd_nn_linear(1, 9, NULL)), PD_OK);
  assert_int_equal(out_features(pd_nn_layer_list_get(list, 4)), 9);
  assert_int_equal(pd_nn_layer_list_delete(list, 1), PD_OK);
  assert_int_equal(pd_nn_layer_list_len(list), 4);
  const int64_t after[] = {1, 2, 7, 9};
  for (int i = 0; i < 4; i++) assert_int_equal(out_features(pd_nn_layer_list_get(list, i)), after[i]);
  assert_null(pd_layer_sublayer(list, "4"));
  assert_ptr_equal(pd_layer_sublayer(list, "3"), pd_nn_layer_list_get(list, 3));
  assert_int_equal(pd_nn_layer_list_delete(list, -1), PD_OK);
  assert_int_equal(pd_nn_layer_list_extend(list, (pd_layer *[]){pd_nn_relu(), pd_nn_tanh()}, 2), PD_OK);
  assert_int_equal(pd_nn_layer_list_len(list), 5);
  assert_string_equal(pd_nn_layer_list_get(list, 4)->type->name, "Tanh");

  /* bad inputs */
  expect_status_error(pd_nn_layer_list_insert(list, 5, pd_nn_relu()), "LayerList.insert",
                      "index 5 is out of range for length 5 (valid range [-5, 5))");
  assert_null(pd_nn_layer_list_get(list, 7));
  expect_error(NULL, "LayerList.get", "index 7");
  expect_status_error(pd_nn_layer_list_delete(list, -6), "LayerList.delete", "-6");
  expect_status_error(pd_nn_layer_list_append(list, NULL), "LayerList.append", "NULL");
  pd_layer *seq = pd_nn_sequential(NULL, 0);
  expect_status_error(pd_nn_layer_list_append(seq, pd_nn_relu()), "LayerList.append",
                      "expects a LayerList, got a Sequential");
  pd_layer_release(seq);
  /* a LayerList has no forward */
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT32, 1, SHAPE(1), 1);
  expect_error(pd_layer_call1(list, x), "LayerList", "forward");
  pd_scope_end();
  pd_layer_release(list);
  expect_no_live_tensors();
}

static void test_parameter_list(void **state) {
  (void)state;
  pd_tensor *a = pd_ones(2, SHAPE(2, 3), PD_FLOAT32), *b = pd_zeros(1, SHAPE(4), PD_FLOAT32);
  pd_layer *list = pd_nn_parameter_list(&a, 1);
  assert_int_equal(pd_nn_parameter_list_append(list, b), PD_OK);
  assert_int_equal(pd_nn_parameter_list_len(list), 2);
  assert_ptr_equal(pd_nn_parameter_list_get(list, 0), a);
  assert_ptr_equal(pd_nn_parameter_list_get(list, -1), b);
  assert_false(pd_tensor_stop_gradient(b));
  pd_named_tensors ps;
  assert_int_equal(pd_layer_named_parameters(list, &ps), PD_OK);
  assert_int_equal(ps.n, 2);
  assert_string_equal(ps.names[0], "0");
  assert_string_equal(ps.names[1], "1");
  pd_named_tensors_free(&ps);
  /* inside a Sequential-like owner the names nest */
  pd_layer *owner = pd_nn_layer_dict((const char *[]){"params"}, &list, 1);
  assert_int_equal(pd_layer_named_parameters(owner, &ps), PD_OK);
  assert_string_equal(ps.names[1], "params.1");
  pd_named_tensors_free(&ps);
  assert_null(pd_nn_parameter_list_get(list, 2));
  expect_error(NULL, "ParameterList.get", "index 2");
  expect_status_error(pd_nn_parameter_list_append(list, NULL), "ParameterList.append", "NULL");
  pd_tensor_release(a);
  pd_tensor_release(b);
  pd_layer_release(owner);
  expect_no_live_tensors();
}

static void test_layer_dict(void **state) {
  (void)state;
  pd_layer *d = pd_nn_layer_dict((const char *[]){"a", "b"},
                                 (pd_layer *[]){pd_nn_linear(1, 1, NULL), pd_nn_linear(1, 2, NULL)}, 2);
  assert_int_equal(pd_nn_layer_dict_set(d, "c", pd_nn_linear(1, 3, NULL)), PD_OK);
  assert_int_equal(pd_nn_layer_dict_set(d, "a", pd_nn_linear(1, 4, NULL)), PD_OK); /* replaces in place */
  assert_int_equal(pd_nn_layer_dict_len(d), 3);
  assert_string_equal(pd_nn_layer_dict_key(d, 0), "a");
  assert_string_equal(pd_nn_layer_dict_key(d, 2), "c");
  assert_int_equal(out_features(pd_nn_layer_dict_get(d, "a")), 4);
  assert_true(pd_nn_layer_dict_contains(d, "b"));
  assert_false(pd_nn_layer_dict_contains(d, "z"));
  pd_named_tensors ps;
  assert_int_equal(pd_layer_named_parameters(d, &ps), PD_OK);
  assert_int_equal(ps.n, 6);
  assert_string_equal(ps.names[0], "a.weight");
  assert_string_equal(ps.names[4], "c.weight");
  pd_named_tensors_free(&ps);

  pd_layer *b = pd_nn_layer_dict_pop(d, "b");
  assert_int_equal(out_features(b), 2);
  pd_layer_release(b);
  assert_int_equal(pd_nn_layer_dict_len(d), 2);
  assert_string_equal(pd_nn_layer_dict_key(d, 1), "c");
  assert_null(pd_layer_sublayer(d, "b"));
  assert_null(pd_nn_layer_dict_get(d, "b"));
  expect_error(NULL, "LayerDict.get", "no key 'b'");
  assert_null(pd_nn_layer_dict_pop(d, "q"));
  expect_error(NULL, "LayerDict.pop", "'q'");
  assert_null(pd_nn_layer_dict_key(d, 2));
  expect_error(NULL, "LayerDict.key", "index 2");
  assert_int_equal(pd_nn_layer_dict_clear(d), PD_OK);
  assert_int_equal(pd_nn_layer_dict_len(d), 0);
  assert_int_equal(pd_layer_named_parameters(d, &ps), PD_OK);
  assert_int_equal(ps.n, 0);
  pd_named_tensors_free(&ps);
  expect_status_error(pd_nn_layer_dict_set(d, "x.y", pd_nn_relu()), "x.y", NULL);
  pd_layer_release(d);
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sequential_parameters_and_forward),
      cmocka_unit_test(test_sequential_named_empty_and_errors),
      cmocka_unit_test(test_sequential_train_eval_propagates),
      cmocka_unit_test(test_layer_list),
      cmocka_unit_test(test_parameter_list),
      cmocka_unit_test(test_layer_dict),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
