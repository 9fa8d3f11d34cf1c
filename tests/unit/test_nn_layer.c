/* The layer base: the seed's LinearNet as a user layer in C, parameter
 * names, state dicts, train/eval, hooks, printing, initializers. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "linear_net.h"
#include "test_util.h"

static void test_linear_net_parameters(void **state) {
  (void)state;
  linear_net *net = linear_net_new();
  pd_named_tensors ps;
  assert_int_equal(pd_layer_named_parameters(&net->base, &ps), PD_OK);
  assert_int_equal(ps.n, 4);
  assert_string_equal(ps.names[0], "linear1.weight");
  assert_string_equal(ps.names[1], "linear1.bias");
  assert_string_equal(ps.names[2], "linear2.weight");
  assert_string_equal(ps.names[3], "linear2.bias");
  expect_shape(ps.tensors[0], 2, SHAPE(10, 10));
  expect_shape(ps.tensors[3], 1, SHAPE(1));
  assert_false(pd_tensor_stop_gradient(ps.tensors[0]));
  assert_non_null(strstr(pd_tensor_name(ps.tensors[0]), "linear_"));
  assert_non_null(strstr(pd_tensor_name(ps.tensors[0]), ".w_0"));
  assert_non_null(strstr(pd_tensor_name(ps.tensors[1]), ".b_0"));
  /* Xavier-uniform weight within +-sqrt(6/(in+out)), zero bias */
  double lim = sqrt(6.0 / 20);
  for (int64_t i = 0; i < 100; i++) assert_true(fabs(pd_tensor_item_at(ps.tensors[0], i)) <= lim);
  for (int64_t i = 0; i < 10; i++) assert_true(pd_tensor_item_at(ps.tensors[1], i) == 0);
  pd_named_tensors_free(&ps);
  pd_named_layers subs;
  assert_int_equal(pd_layer_named_sublayers(&net->base, &subs), PD_OK);
  assert_int_equal(subs.n, 2);
  assert_string_equal(subs.names[1], "linear2");
  pd_named_layers_free(&subs);
  pd_layer_release(&net->base);
  expect_no_live_tensors();
}

/* forward = (x W1 + b1) W2 + b2, checked against the same product in the
 * test; backward gives dL/dW2 = h^T g for L = sum(y). */
static void test_linear_net_forward_backward(void **state) {
  (void)state;
  pd_seed(7);
  linear_net *net = linear_net_new();
  pd_scope_begin();
  pd_tensor *x = pd_randn(2, SHAPE(4, 10), PD_FLOAT32);
  pd_tensor *y = pd_layer_call1(&net->base, x);
  expect_shape(y, 2, SHAPE(4, 1));
  pd_tensor *w1 = pd_layer_parameter(net->linear1, "weight"), *b1 = pd_layer_parameter(net->linear1, "bias");
  pd_tensor *w2 = pd_layer_parameter(net->linear2, "weight"), *b2 = pd_layer_parameter(net->linear2, "bias");
  double h[4][10], want[4];
  for (int r = 0; r < 4; r++) {
    for (int j = 0; j < 10; j++) {
      double s = pd_tensor_item_at(b1, j);
      for (int k = 0; k < 10; k++) s += pd_tensor_item_at(x, r * 10 + k) * pd_tensor_item_at(w1, k * 10 + j);
      h[r][j] = s;
    }
    want[r] = pd_tensor_item_at(b2, 0);
    for (int j = 0; j < 10; j++) want[r] += h[r][j] * pd_tensor_item_at(w2, j);
  }
  expect_values(y, want, 4, 1e-5);
  assert_int_equal(pd_backward(pd_sum(y, NULL, 0, false), NULL, false), PD_OK);
  for (int j = 0; j < 10; j++) {
    double g = h[0][j] + h[1][j] + h[2][j] + h[3][j];
    assert_true(fabs(pd_tensor_item_at(pd_tensor_grad(w2), j) - g) <= 1e-4 * (1 + fabs(g)));
  }
  EXPECT_VALUES(pd_tensor_grad(b2), 0, 4);
  pd_scope_end();
  pd_layer_clear_gradients(&net->base, false);
  assert_null(pd_tensor_grad(w2));
  pd_layer_release(&net->base);
  expect_no_live_tensors();
}

static void test_state_dict_round_trip(void **state) {
  (void)state;
  linear_net *a = linear_net_new(), *b = linear_net_new();
  pd_tensor *mean = pd_zeros(1, SHAPE(3), PD_FLOAT32), *scratch = pd_ones(1, SHAPE(2), PD_FLOAT32);
  assert_int_equal(pd_layer_register_buffer(a->linear1, "running_mean", mean, true), PD_OK);
  assert_int_equal(pd_layer_register_buffer(a->linear1, "scratch", scratch, false), PD_OK);
  pd_named_tensors sd, missing, unexpected;
  assert_int_equal(pd_layer_state_dict(&a->base, &sd), PD_OK);
  assert_int_equal(sd.n, 5); /* 4 parameters + the persistable buffer */
  assert_string_equal(sd.names[2], "linear1.running_mean");
  assert_int_equal(pd_layer_set_state_dict(&b->base, &sd, &missing, &unexpected), PD_OK);
  assert_int_equal(missing.n, 0);
  assert_int_equal(unexpected.n, 1);
  assert_string_equal(unexpected.names[0], "linear1.running_mean");
  expect_close(pd_layer_parameter(b->linear1, "weight"), pd_layer_parameter(a->linear1, "weight"), 0, 0);
  expect_close(pd_layer_parameter(b->linear2, "bias"), pd_layer_parameter(a->linear2, "bias"), 0, 0);
  pd_named_tensors_free(&missing);
  pd_named_tensors_free(&unexpected);
  /* a state dict lacking entries reports them missing */
  pd_named_tensors part = {.n = 1, .names = sd.names, .tensors = sd.tensors};
  assert_int_equal(pd_layer_set_state_dict(&b->base, &part, &missing, NULL), PD_OK);
  assert_int_equal(missing.n, 3);
  assert_string_equal(missing.names[0], "linear1.bias");
  pd_named_tensors_free(&missing);
  /* a shape mismatch changes nothing and names both shapes */
  pd_tensor *wrong = pd_zeros(2, SHAPE(3, 3), PD_FLOAT32);
  pd_named_tensors bad = {.n = 1, .names = (char *[]){"linear1.weight"}, .tensors = &wrong};
  assert_true(pd_layer_set_state_dict(&b->base, &bad, NULL, NULL) < 0);
  assert_non_null(strstr(pd_last_error(), "[3, 3]"));
  assert_non_null(strstr(pd_last_error(), "[10, 10]"));
  pd_clear_error();
  pd_tensor_release(wrong);
  pd_named_tensors_free(&sd);
  pd_tensor_release(mean);
  pd_tensor_release(scratch);
  pd_layer_release(&a->base);
  pd_layer_release(&b->base);
  expect_no_live_tensors();
}

static int count_calls(pd_layer *l, pd_tensor **in, int n_in, void *user) {
  (void)l;
  (void)in;
  (void)n_in;
  (*(int *)user)++;
  return 0;
}

static int double_output(pd_layer *l, pd_tensor *const *in, int n_in, pd_tensor **out, int n_out,
                         void *user) {
  (void)l;
  (void)in;
  (void)n_in;
  (void)n_out;
  (void)user;
  out[0] = pd_scale(out[0], 2.0, 0, true);
  return 1;
}

static void test_modes_hooks_and_repr(void **state) {
  (void)state;
  linear_net *net = linear_net_new();
  assert_true(net->linear1->training);
  pd_layer_eval(&net->base);
  assert_false(net->base.training);
  assert_false(net->linear2->training);
  pd_layer_train(&net->base);
  assert_true(net->linear2->training);
  int calls = 0;
  int id = pd_layer_register_forward_pre_hook(net->linear1, count_calls, &calls);
  assert_true(id > 0);
  int post = pd_layer_register_forward_post_hook(&net->base, double_output, NULL);
  pd_scope_begin();
  pd_tensor *x = pd_ones(2, SHAPE(1, 10), PD_FLOAT32);
  pd_tensor *y1 = pd_layer_call1(&net->base, x);
  assert_int_equal(pd_layer_remove_hook(&net->base, post), PD_OK);
  pd_tensor *y2 = pd_layer_call1(&net->base, x);
  assert_int_equal(calls, 2);
  EXPECT_VALUES(y1, 1e-6, 2 * pd_tensor_item(y2));
  assert_true(pd_layer_remove_hook(&net->base, post) < 0);
  pd_clear_error();
  /* wrong input shape: the error names the op and shapes, nothing leaks */
  pd_tensor *bad = pd_ones(2, SHAPE(1, 7), PD_FLOAT32);
  expect_error(pd_layer_call1(&net->base, bad), "matmul", "[1, 7]");
  pd_scope_end();
  char *s = pd_layer_to_string(&net->base);
  assert_string_equal(s,
                      "LinearNet(\n"
                      "  (linear1): Linear(in_features=10, out_features=10, dtype=float32)\n"
                      "  (linear2): Linear(in_features=10, out_features=1, dtype=float32)\n"
                      ")");
  free(s);
  pd_layer_release(&net->base);
  expect_no_live_tensors();
}

static void test_param_attr_and_initializers(void **state) {
  (void)state;
  pd_initializer c = pd_nn_initializer_constant(0.5);
  pd_param_attr wa = {.name = "my_w", .initializer = &c, .learning_rate = 0.1, .not_trainable = true};
  pd_layer *l = pd_nn_linear(3, 2, &(pd_nn_linear_opts){.weight_attr = &wa, .no_bias = true});
  pd_tensor *w = pd_layer_parameter(l, "weight");
  assert_string_equal(pd_tensor_name(w), "my_w");
  assert_null(pd_layer_parameter(l, "bias"));
  EXPECT_VALUES(w, 0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5);
  assert_true(pd_tensor_stop_gradient(w));
  const pd_param_info *pi = pd_tensor_param_info(w);
  assert_non_null(pi);
  assert_true(pi->learning_rate == 0.1);
  assert_false(pi->trainable);
  /* statistics of the random initializers on a large tensor */
  pd_scope_begin();
  pd_tensor *t = pd_zeros(2, SHAPE(200, 300), PD_FLOAT64);
  pd_initializer kn = pd_nn_initializer_kaiming_normal(0, 0, NULL);
  assert_int_equal(pd_initializer_apply(&kn, t), PD_OK);
  double s = 0, s2 = 0;
  for (int64_t i = 0; i < 60000; i++) {
    double v = pd_tensor_item_at(t, i);
    s += v;
    s2 += v * v;
  }
  double var = s2 / 60000 - (s / 60000) * (s / 60000);
  assert_true(fabs(var - 2.0 / 200) < 0.05 * 2.0 / 200); /* std = sqrt(2 / fan_in) */
  pd_initializer tn = pd_nn_initializer_truncated_normal(1.0, 0.5, 0.0, 2.0);
  assert_int_equal(pd_initializer_apply(&tn, t), PD_OK);
  for (int64_t i = 0; i < 60000; i++) assert_true(fabs(pd_tensor_item_at(t, i) - 1.0) <= 1.0);
  pd_initializer bad = pd_nn_initializer_assign(pd_ones(1, SHAPE(5), PD_FLOAT32));
  assert_true(pd_initializer_apply(&bad, t) < 0);
  assert_non_null(strstr(pd_last_error(), "[5]"));
  pd_clear_error();
  pd_scope_end();
  assert_null(pd_nn_linear(0, 3, NULL));
  assert_non_null(strstr(pd_last_error(), "in_features (0)"));
  pd_clear_error();
  pd_layer_release(l);
  expect_no_live_tensors();
}

/* ---- apply, named_buffers, remove_sublayer ----------------------------------------------------------- */

static const pd_layer_type node_type = {"Node", NULL, NULL, NULL};

/* root
 *   a (Node): buffer "stat" (persistable)
 *     a1 (Linear 2->3): buffer "cnt" (not persistable)
 *     a2 (Linear 3->1)
 *   b (Linear 1->2): buffer "shared" (the same tensor as root's "rb", not persistable here)
 * root: buffers "rb" (persistable), "tmp" (not persistable). */
typedef struct tree {
  pd_layer *root, *a, *a1, *a2, *b;
} tree;

static tree tree_new(void) {
  tree t;
  t.root = pd_layer_new(sizeof(pd_layer), &node_type);
  t.a = pd_layer_add_sublayer(t.root, "a", pd_layer_new(sizeof(pd_layer), &node_type));
  t.a1 = pd_layer_add_sublayer(t.a, "a1", pd_nn_linear(2, 3, NULL));
  t.a2 = pd_layer_add_sublayer(t.a, "a2", pd_nn_linear(3, 1, NULL));
  t.b = pd_layer_add_sublayer(t.root, "b", pd_nn_linear(1, 2, NULL));
  pd_scope_begin();
  pd_tensor *rb = pd_zeros(1, SHAPE(2), PD_FLOAT32);
  assert_int_equal(pd_layer_register_buffer(t.root, "rb", rb, true), PD_OK);
  assert_int_equal(pd_layer_register_buffer(t.root, "tmp", pd_ones(1, SHAPE(1), PD_FLOAT32), false), PD_OK);
  assert_int_equal(pd_layer_register_buffer(t.a, "stat", pd_ones(1, SHAPE(3), PD_FLOAT32), true), PD_OK);
  assert_int_equal(pd_layer_register_buffer(t.a1, "cnt", pd_zeros(1, SHAPE(1), PD_INT64), false), PD_OK);
  assert_int_equal(pd_layer_register_buffer(t.b, "shared", rb, false), PD_OK);
  pd_scope_end(); /* the layers hold the buffers now */
  return t;
}

/* The names of a list, comma-separated, for exact comparison. */
static void expect_names(const pd_named_tensors *l, const char *want) {
  char got[512] = "";
  size_t k = 0;
  for (int i = 0; i < l->n; i++)
    k += (size_t)snprintf(got + k, sizeof got - k, "%s%s", i ? "," : "", l->names[i]);
  assert_string_equal(got, want);
}

typedef struct visit_log {
  int n;
  pd_layer *seen[16];
  bool training[16];
} visit_log;

static void record_visit(pd_layer *l, void *user) {
  visit_log *v = user;
  v->training[v->n] = l->training;
  v->seen[v->n++] = l;
}

static void test_apply_order(void **state) {
  (void)state;
  tree t = tree_new();
  /* Paddle's apply: each child's apply (its own subtree, children first), then fn(self) */
  visit_log v = {0};
  pd_layer_apply(t.root, record_visit, &v);
  pd_layer *want[5] = {t.a1, t.a2, t.a, t.b, t.root};
  assert_int_equal(v.n, 5);
  for (int i = 0; i < 5; i++) assert_ptr_equal(v.seen[i], want[i]);
  /* on a subtree, and on a leaf: only those */
  v.n = 0;
  pd_layer_apply(t.a, record_visit, &v);
  assert_int_equal(v.n, 3);
  assert_ptr_equal(v.seen[0], t.a1);
  assert_ptr_equal(v.seen[2], t.a);
  v.n = 0;
  pd_layer_apply(t.b, record_visit, &v);
  assert_int_equal(v.n, 1);
  assert_ptr_equal(v.seen[0], t.b);
  /* eval() reaches every layer through the same walk */
  pd_layer_eval(t.root);
  v.n = 0;
  pd_layer_apply(t.root, record_visit, &v);
  for (int i = 0; i < 5; i++) assert_false(v.training[i]);
  pd_layer_train(t.a);
  assert_true(t.a1->training && t.a->training);
  assert_false(t.root->training || t.b->training);
  /* NULL layer or callback: nothing happens */
  pd_layer_apply(NULL, record_visit, &v);
  pd_layer_apply(t.root, NULL, NULL);
  pd_layer_release(t.root);
  expect_no_live_tensors();
}

static void test_named_buffers(void **state) {
  (void)state;
  tree t = tree_new();
  pd_named_tensors l;
  /* persistable and not, nested prefixes, l's own first, each tensor once ("b.shared" is "rb") */
  assert_int_equal(pd_layer_named_buffers(t.root, &l), PD_OK);
  expect_names(&l, "rb,tmp,a.stat,a.a1.cnt");
  assert_ptr_equal(l.tensors[0], pd_layer_buffer(t.root, "rb"));
  assert_ptr_equal(l.tensors[3], pd_layer_buffer(t.a1, "cnt"));
  pd_named_tensors_free(&l);
  /* include_sublayers=False: only the layer's own; a prefix on every name */
  assert_int_equal(pd_layer_named_buffers_with_prefix(t.root, NULL, false, &l), PD_OK);
  expect_names(&l, "rb,tmp");
  pd_named_tensors_free(&l);
  assert_int_equal(pd_layer_named_buffers_with_prefix(t.root, "net", true, &l), PD_OK);
  expect_names(&l, "net.rb,net.tmp,net.a.stat,net.a.a1.cnt");
  pd_named_tensors_free(&l);
  assert_int_equal(pd_layer_named_buffers_with_prefix(t.a, "", true, &l), PD_OK);
  expect_names(&l, "stat,a1.cnt");
  pd_named_tensors_free(&l);
  assert_int_equal(pd_layer_named_buffers_with_prefix(t.a2, NULL, true, &l), PD_OK);
  assert_int_equal(l.n, 0);
  pd_named_tensors_free(&l);
  assert_int_equal(pd_layer_named_buffers(t.b, &l), PD_OK);
  expect_names(&l, "shared"); /* on its own, b names the shared tensor itself */
  pd_named_tensors_free(&l);
  /* named_parameters with the same options */
  assert_int_equal(pd_layer_named_parameters_with_prefix(t.root, "m", true, &l), PD_OK);
  expect_names(&l, "m.a.a1.weight,m.a.a1.bias,m.a.a2.weight,m.a.a2.bias,m.b.weight,m.b.bias");
  pd_named_tensors_free(&l);
  assert_int_equal(pd_layer_named_parameters_with_prefix(t.root, NULL, false, &l), PD_OK);
  assert_int_equal(l.n, 0);
  pd_named_tensors_free(&l);
  assert_int_equal(pd_layer_named_parameters_with_prefix(t.a1, NULL, false, &l), PD_OK);
  expect_names(&l, "weight,bias");
  pd_named_tensors_free(&l);
  /* the state dict: per layer its parameters, then its persistable buffers, then its sublayers */
  assert_int_equal(pd_layer_state_dict(t.root, &l), PD_OK);
  expect_names(&l, "rb,a.stat,a.a1.weight,a.a1.bias,a.a2.weight,a.a2.bias,b.weight,b.bias");
  pd_named_tensors_free(&l);
  /* re-registering keeps the position; persistable can change; NULL removes */
  pd_scope_begin();
  assert_int_equal(pd_layer_register_buffer(t.root, "rb", pd_full(1, SHAPE(2), 4, PD_FLOAT32), false), PD_OK);
  pd_scope_end();
  assert_int_equal(pd_layer_named_buffers(t.root, &l), PD_OK);
  expect_names(&l, "rb,tmp,a.stat,a.a1.cnt,b.shared"); /* the old "rb" tensor is b's alone now */
  pd_named_tensors_free(&l);
  assert_int_equal(pd_layer_state_dict(t.root, &l), PD_OK);
  expect_names(&l, "a.stat,a.a1.weight,a.a1.bias,a.a2.weight,a.a2.bias,b.weight,b.bias");
  pd_named_tensors_free(&l);
  assert_int_equal(pd_layer_register_buffer(t.root, "tmp", NULL, false), PD_OK);
  assert_null(pd_layer_buffer(t.root, "tmp"));
  assert_int_equal(pd_layer_named_buffers_with_prefix(t.root, NULL, false, &l), PD_OK);
  expect_names(&l, "rb");
  pd_named_tensors_free(&l);
  /* bad arguments */
  assert_true(pd_layer_named_buffers_with_prefix(NULL, NULL, true, &l) < 0);
  assert_int_equal(l.n, 0);
  assert_true(pd_layer_named_buffers(t.root, NULL) < 0);
  pd_clear_error();
  pd_layer_release(t.root);
  expect_no_live_tensors();
}

static void test_remove_sublayer(void **state) {
  (void)state;
  tree t = tree_new();
  pd_tensor *a1w = pd_layer_parameter(t.a1, "weight");
  /* remove "a": its parameters and buffers leave the parent's lists and state dict */
  pd_layer *a = pd_layer_remove_sublayer(t.root, "a");
  assert_ptr_equal(a, t.a);
  assert_null(pd_layer_sublayer(t.root, "a"));
  pd_named_tensors l;
  assert_int_equal(pd_layer_named_parameters(t.root, &l), PD_OK);
  expect_names(&l, "b.weight,b.bias");
  pd_named_tensors_free(&l);
  assert_int_equal(pd_layer_state_dict(t.root, &l), PD_OK);
  expect_names(&l, "rb,b.weight,b.bias");
  pd_named_tensors_free(&l);
  assert_int_equal(pd_layer_named_buffers(t.root, &l), PD_OK);
  expect_names(&l, "rb,tmp");
  pd_named_tensors_free(&l);
  pd_named_layers nl;
  assert_int_equal(pd_layer_named_sublayers(t.root, &nl), PD_OK);
  assert_int_equal(nl.n, 1);
  assert_string_equal(nl.names[0], "b");
  pd_named_layers_free(&nl);
  /* the removed layer is the caller's and still whole */
  assert_int_equal(pd_layer_named_parameters(a, &l), PD_OK);
  expect_names(&l, "a1.weight,a1.bias,a2.weight,a2.bias");
  assert_ptr_equal(l.tensors[0], a1w);
  pd_named_tensors_free(&l);
  /* removing from the middle keeps the order of the others */
  pd_layer_add_sublayer(t.root, "c", pd_nn_linear(1, 1, NULL));
  pd_layer_add_sublayer(t.root, "d", pd_nn_linear(1, 1, NULL));
  pd_layer_release(pd_layer_remove_sublayer(t.root, "c"));
  assert_int_equal(pd_layer_named_sublayers(t.root, &nl), PD_OK);
  assert_int_equal(nl.n, 2);
  assert_string_equal(nl.names[0], "b");
  assert_string_equal(nl.names[1], "d");
  pd_named_layers_free(&nl);
  assert_int_equal(pd_layer_named_parameters(t.root, &l), PD_OK);
  expect_names(&l, "b.weight,b.bias,d.weight,d.bias");
  pd_named_tensors_free(&l);
  /* an unknown name: NULL and an error naming it and the sublayers there are */
  assert_null(pd_layer_remove_sublayer(t.root, "a"));
  assert_non_null(strstr(pd_last_error(), "remove_sublayer"));
  assert_non_null(strstr(pd_last_error(), "'a'"));
  assert_non_null(strstr(pd_last_error(), "'b', 'd'"));
  assert_null(pd_layer_remove_sublayer(t.a2, "x"));
  assert_non_null(strstr(pd_last_error(), "none"));
  assert_null(pd_layer_remove_sublayer(t.root, NULL));
  assert_null(pd_layer_remove_sublayer(NULL, "b"));
  pd_clear_error();
  pd_layer_release(a);
  pd_layer_release(t.root);
  expect_no_live_tensors();
}

/* A layer in its own subtree would make every walk over it (train,
 * parameters, state_dict) recurse until the stack overflows. */
static void test_sublayer_cycles_refused(void **state) {
  (void)state;
  tree t = tree_new();
  const char *root = pd_layer_full_name(t.root), *a = pd_layer_full_name(t.a);
  /* itself */
  assert_null(pd_layer_add_sublayer(t.a, "me", pd_layer_retain(t.a)));
  assert_non_null(strstr(pd_last_error(), "add_sublayer"));
  assert_non_null(strstr(pd_last_error(), a));
  assert_non_null(strstr(pd_last_error(), "its own sublayer"));
  /* its parent (a -> root -> a) and its grandparent (a1 -> root -> a -> a1) */
  assert_null(pd_layer_add_sublayer(t.a, "up", pd_layer_retain(t.root)));
  assert_non_null(strstr(pd_last_error(), "cycle"));
  assert_non_null(strstr(pd_last_error(), root));
  assert_non_null(strstr(pd_last_error(), a));
  assert_null(pd_layer_add_sublayer(t.a1, "up", pd_layer_retain(t.root)));
  assert_non_null(strstr(pd_last_error(), pd_layer_full_name(t.a1)));
  pd_clear_error();
  /* the same layer under two parents is no cycle */
  assert_ptr_equal(pd_layer_add_sublayer(t.b, "shared", pd_layer_retain(t.a2)), t.a2);
  /* the tree is unchanged and the walks end */
  assert_null(pd_layer_sublayer(t.a, "me"));
  assert_null(pd_layer_sublayer(t.a, "up"));
  pd_layer_eval(t.root);
  assert_false(t.a1->training);
  pd_layer_train(t.root);
  assert_true(t.a1->training);
  pd_named_layers nl;
  assert_int_equal(pd_layer_named_sublayers(t.root, &nl), PD_OK);
  assert_int_equal(nl.n, 4); /* a, a.a1, a.a2, b (b.shared is a2, listed once) */
  pd_named_layers_free(&nl);
  pd_layer_release(t.root);
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_linear_net_parameters),
      cmocka_unit_test(test_linear_net_forward_backward),
      cmocka_unit_test(test_state_dict_round_trip),
      cmocka_unit_test(test_modes_hooks_and_repr),
      cmocka_unit_test(test_param_attr_and_initializers),
      cmocka_unit_test(test_apply_order),
      cmocka_unit_test(test_named_buffers),
      cmocka_unit_test(test_remove_sublayer),
      cmocka_unit_test(test_sublayer_cycles_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
