/* The Program IR, recording under program_guard, printing, clone and the
 * Executor's interpreter. */
#include <stdlib.h>
#include <string.h>

#include "paddlec/static.h"
#include "static/static_internal.h"
#include "test_util.h"

/* Records x @ w + b with x = data([-1, 3]) into fresh programs. */
typedef struct net {
  pd_program *main, *startup;
  pd_tensor *x, *w, *b, *y;
} net;

static void build(net *n, pd_dtype dt) {
  n->main = pd_static_program();
  n->startup = pd_static_program();
  assert_non_null(n->main);
  assert_int_equal(pd_static_program_guard_begin(n->main, n->startup), PD_OK);
  assert_false(pd_in_dynamic_mode());
  n->x = pd_static_data("x", 2, SHAPE(-1, 3), dt);
  pd_initializer wi = pd_nn_initializer_constant(0.5);
  n->w = pd_static_create_parameter(2, SHAPE(3, 2), dt, "w", &wi, false);
  n->b = pd_static_create_parameter(1, SHAPE(2), dt, "b", NULL, true);
  pd_tensor *xw = pd_matmul(n->x, n->w, false, false);
  n->y = pd_add(xw, n->b);
  assert_non_null(n->y);
  pd_tensor_release(xw);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  assert_true(pd_in_dynamic_mode());
}

static void release_net(net *n) {
  pd_tensor_release(n->x);
  pd_tensor_release(n->w);
  pd_tensor_release(n->b);
  pd_tensor_release(n->y);
  pd_program_release(n->main);
  pd_program_release(n->startup);
}

static void test_records_ops_and_vars(void **state) {
  (void)state;
  net n;
  build(&n, PD_FLOAT32);
  pd_static_block *gb = pd_program_global_block(n.main);
  assert_int_equal(pd_static_block_num_ops(gb), 2);
  assert_string_equal(pd_static_block_op_type(gb, 0), "matmul");
  assert_string_equal(pd_static_block_op_type(gb, 1), "add");
  /* y is a Variable: meta, batch unknown, named like Paddle's temporaries */
  assert_true(pd_tensor_is_meta(n.y));
  expect_shape(n.y, 2, SHAPE(-1, 2));
  const char *yn = pd_tensor_name(n.y);
  assert_non_null(yn);
  assert_non_null(strstr(yn, "add_"));
  assert_non_null(strstr(yn, ".tmp_0"));
  pd_static_var_info info;
  assert_int_equal(pd_program_var_info(n.main, "w", &info), PD_OK);
  assert_true(info.persistable && info.is_parameter && !info.stop_gradient);
  assert_int_equal(pd_program_var_info(n.main, "x", &info), PD_OK);
  assert_true(info.is_data && info.stop_gradient && !info.persistable);
  assert_int_equal(info.shape[0], -1);
  assert_int_equal(pd_program_var_info(n.main, yn, &info), PD_OK);
  assert_false(info.stop_gradient); /* it depends on a parameter */
  /* the startup program initialises the parameters: Constant(0.5) and the bias zeros as full ops */
  pd_static_block *sb = pd_program_global_block(n.startup);
  assert_int_equal(pd_static_block_num_ops(sb), 2);
  assert_string_equal(pd_static_block_op_type(sb, 0), "full");
  /* list_vars: x, w, b, the matmul result and y */
  pd_tensor *vars[8];
  assert_int_equal(pd_program_list_vars(n.main, vars, 8), 5);
  assert_ptr_equal(vars[0], n.x);
  assert_ptr_equal(pd_static_block_var(gb, "x"), n.x);
  assert_null(pd_static_block_var(gb, "nope"));
  assert_non_null(strstr(pd_last_error(), "'nope'"));
  pd_clear_error();
  release_net(&n);
}

static void test_prints_like_paddle(void **state) {
  (void)state;
  net n;
  build(&n, PD_FLOAT32);
  char *s = pd_program_to_string(n.main);
  assert_non_null(s);
  assert_non_null(strstr(s, "{ // block 0\n"));
  assert_non_null(strstr(s, "    var x : LOD_TENSOR.shape(-1, 3).dtype(float32).stop_gradient(True)\n"));
  assert_non_null(strstr(
      s, "    persist trainable param w : LOD_TENSOR.shape(3, 2).dtype(float32).stop_gradient(False)\n"));
  assert_non_null(strstr(s, "= matmul(inputs={X=['x'], Y=['w']}, transpose_x = 0, transpose_y = 0)\n"));
  free(s);
  release_net(&n);
}

static void test_executor_matches_eager(void **state) {
  (void)state;
  net n;
  build(&n, PD_FLOAT64);
  pd_executor *exe = pd_static_executor(PD_CPU);
  pd_var_scope *scope = pd_static_scope();
  assert_int_equal(pd_executor_run(exe, n.startup, NULL, 0, NULL, 0, NULL, scope), PD_OK);
  pd_tensor *w = pd_var_scope_find_var(scope, "w");
  assert_non_null(w);
  EXPECT_VALUES(w, 0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5);
  pd_tensor *xv = T(PD_FLOAT64, 2, SHAPE(2, 3), 1, 2, 3, 4, 5, 6);
  pd_static_feed feed = {"x", xv};
  pd_tensor *out = NULL;
  assert_int_equal(pd_executor_run(exe, n.main, &feed, 1, &n.y, 1, &out, scope), PD_OK);
  EXPECT_VALUES(out, 0, 3, 3, 7.5, 7.5);
  pd_tensor_release(out);
  /* a batch of another size runs the same program */
  pd_tensor *x1 = T(PD_FLOAT64, 2, SHAPE(1, 3), 2, 0, 0);
  feed.value = x1;
  assert_int_equal(pd_executor_run(exe, n.main, &feed, 1, &n.y, 1, &out, scope), PD_OK);
  EXPECT_VALUES(out, 0, 1, 1);
  pd_tensor_release(out);
  pd_tensor_release(x1);
  pd_tensor_release(xv);
  pd_var_scope_release(scope);
  pd_executor_release(exe);
  release_net(&n);
}

/* Runs given no scope use the global scope (paddle.static.global_scope). */
static void test_global_scope_by_default(void **state) {
  (void)state;
  net n;
  build(&n, PD_FLOAT64);
  pd_executor *exe = pd_static_executor(PD_CPU);
  assert_int_equal(pd_executor_run(exe, n.startup, NULL, 0, NULL, 0, NULL, NULL), PD_OK);
  pd_tensor *w = pd_var_scope_find_var(pd_static_global_scope(), "w");
  assert_non_null(w);
  EXPECT_VALUES(w, 0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5);
  pd_var_scope_release(pd_static_global_scope()); /* a no-op: the global scope stays */
  assert_ptr_equal(pd_var_scope_find_var(pd_static_global_scope(), "w"), w);
  pd_executor_release(exe);
  release_net(&n);
}

static void expect_run_error(pd_executor *exe, pd_program *p, pd_static_feed *feed, int nf, pd_tensor *fetch,
                             pd_var_scope *scope, const char *frag1, const char *frag2) {
  pd_tensor *out = (pd_tensor *)1;
  assert_true(pd_executor_run(exe, p, feed, nf, &fetch, 1, &out, scope) < 0);
  assert_null(out);
  const char *e = pd_last_error();
  if (!strstr(e, frag1) || (frag2 && !strstr(e, frag2)))
    fail_msg("error '%s' lacks '%s'/'%s'", e, frag1, frag2);
  pd_clear_error();
}

static void test_executor_errors_name_the_variable(void **state) {
  (void)state;
  net n;
  build(&n, PD_FLOAT32);
  pd_executor *exe = pd_static_executor(PD_CPU);
  pd_var_scope *scope = pd_static_scope();
  pd_tensor *good = pd_zeros(2, SHAPE(4, 3), PD_FLOAT32);
  pd_static_feed feed = {"x", good};
  /* parameters missing: the startup program has not run */
  expect_run_error(exe, n.main, &feed, 1, n.y, scope, "'w'", "startup");
  assert_int_equal(pd_executor_run(exe, n.startup, NULL, 0, NULL, 0, NULL, scope), PD_OK);
  pd_static_feed bad_name = {"z", good};
  expect_run_error(exe, n.main, &bad_name, 1, n.y, scope, "feed 'z'", "'x'");
  pd_tensor *f64 = pd_zeros(2, SHAPE(4, 3), PD_FLOAT64);
  pd_static_feed bad_dtype = {"x", f64};
  expect_run_error(exe, n.main, &bad_dtype, 1, n.y, scope, "feed 'x' is float64", "float32");
  pd_tensor *wide = pd_zeros(2, SHAPE(4, 5), PD_FLOAT32);
  pd_static_feed bad_shape = {"x", wide};
  expect_run_error(exe, n.main, &bad_shape, 1, n.y, scope, "[4, 5]", "[-1, 3]");
  expect_run_error(exe, n.main, NULL, 0, n.y, scope, "'x' was not fed", NULL);
  pd_tensor *stranger = pd_zeros(1, SHAPE(1), PD_FLOAT32);
  pd_tensor_set_name(stranger, "stranger");
  expect_run_error(exe, n.main, &feed, 1, stranger, scope, "fetch 'stranger'", NULL);
  pd_tensor *out = NULL;
  assert_int_equal(pd_executor_run(exe, n.main, &feed, 1, &n.y, 1, &out, scope), PD_OK);
  pd_tensor_release(out);
  pd_tensor_release(stranger);
  pd_tensor_release(wide);
  pd_tensor_release(f64);
  pd_tensor_release(good);
  pd_var_scope_release(scope);
  pd_executor_release(exe);
  release_net(&n);
}

static void test_guards_nest_and_restore(void **state) {
  (void)state;
  pd_program *a = pd_static_program(), *b = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(a, b), PD_OK);
  pd_tensor *xa = pd_static_data("xa", 1, SHAPE(2), PD_FLOAT32);
  assert_int_equal(pd_static_program_guard_begin(b, NULL), PD_OK);
  pd_tensor *xb = pd_static_data("xb", 1, SHAPE(2), PD_FLOAT32);
  pd_tensor *yb = pd_relu(xb);
  /* a Variable of the outer program cannot feed an op of the inner one */
  pd_tensor *mixed = pd_add(xa, xb);
  assert_null(mixed);
  assert_non_null(strstr(pd_last_error(), "'xa' belongs to another Program"));
  pd_clear_error();
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  pd_tensor *ya = pd_relu(xa);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  assert_true(pd_static_program_guard_end() < 0); /* unbalanced */
  pd_clear_error();
  assert_int_equal(pd_static_block_num_ops(pd_program_global_block(a)), 1);
  assert_int_equal(pd_static_block_num_ops(pd_program_global_block(b)), 1);
  /* outside every guard a Variable cannot run */
  assert_null(pd_relu(xa));
  pd_clear_error();
  /* static data outside a guard is an error */
  assert_null(pd_static_data("x", 1, SHAPE(2), PD_FLOAT32));
  assert_non_null(strstr(pd_last_error(), "program_guard"));
  pd_clear_error();
  pd_tensor_release(xa);
  pd_tensor_release(xb);
  pd_tensor_release(yb);
  pd_tensor_release(ya);
  pd_program_release(a);
  pd_program_release(b);
}

static void test_enable_static_records_into_defaults(void **state) {
  (void)state;
  assert_true(pd_in_dynamic_mode());
  pd_enable_static();
  assert_false(pd_in_dynamic_mode());
  pd_program *m = pd_static_default_main_program();
  int before = pd_static_block_num_ops(pd_program_global_block(m));
  pd_tensor *x = pd_static_data("static_mode_x", 1, SHAPE(-1), PD_FLOAT32);
  pd_tensor *y = pd_scale(x, 2.0, 1.0, true);
  assert_int_equal(pd_static_block_num_ops(pd_program_global_block(m)), before + 1);
  pd_disable_static();
  assert_true(pd_in_dynamic_mode());
  pd_tensor_release(x);
  pd_tensor_release(y);
}

/* Values written by code (to_tensor) under the guard are constants of the
 * program: assign_value ops, not a recorded op with no values. */
static void test_to_tensor_under_guard_is_a_constant(void **state) {
  (void)state;
  pd_program *p = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(p, NULL), PD_OK);
  pd_tensor *x = pd_static_data("x", 1, SHAPE(3), PD_FLOAT64);
  pd_tensor *c = pd_tensor_from_f64((const double[]){1, 2, 3}, PD_FLOAT64, 1, SHAPE(3));
  assert_non_null(c);
  assert_false(pd_tensor_is_meta(c));
  pd_tensor *y = pd_multiply(x, c);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  pd_static_block *gb = pd_program_global_block(p);
  assert_string_equal(pd_static_block_op_type(gb, 0), "assign_value");
  pd_executor *exe = pd_static_executor(PD_CPU);
  pd_tensor *xv = T(PD_FLOAT64, 1, SHAPE(3), 2, 2, 2), *out = NULL;
  pd_static_feed feed = {"x", xv};
  assert_int_equal(pd_executor_run(exe, p, &feed, 1, &y, 1, &out, NULL), PD_OK);
  EXPECT_VALUES(out, 0, 2, 4, 6);
  /* code below the ops cannot view a Variable: an error, not a crash */
  assert_null(pd_tensor_new_view(x, 1, SHAPE(3), SHAPE(1), 0));
  assert_non_null(strstr(pd_last_error(), "static Variable"));
  pd_clear_error();
  pd_tensor *ts[] = {x, c, y, xv, out};
  for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) pd_tensor_release(ts[i]);
  pd_executor_release(exe);
  pd_program_release(p);
}

/* create_global_var: a persistable one is filled by the startup program
 * and lives in the scope; another is computed by the main program.
 * static.data from an InputSpec. */
static void test_global_vars_and_input_spec(void **state) {
  (void)state;
  pd_program *main = pd_static_program(), *startup = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(main, startup), PD_OK);
  pd_input_spec spec = {.ndim = 2, .shape = {-1, 2}, .dtype = PD_FLOAT64, .name = "spec_x"};
  pd_tensor *x = pd_static_data_from_spec(&spec);
  assert_non_null(x);
  expect_shape(x, 2, SHAPE(-1, 2));
  pd_tensor *g = pd_static_create_global_var(1, SHAPE(2), 3.5, PD_FLOAT64, true, "step_scale");
  pd_tensor *b = pd_static_create_global_var(1, SHAPE(2), -1.0, PD_FLOAT64, false, NULL);
  pd_tensor *xg = pd_multiply(x, g), *y = pd_add(xg, b);
  assert_null(pd_static_create_global_var(1, SHAPE(2), 0, PD_FLOAT64, true, "step_scale")); /* taken */
  pd_clear_error();
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  pd_static_var_info info;
  assert_int_equal(pd_program_var_info(main, "step_scale", &info), PD_OK);
  assert_true(info.persistable);
  assert_int_equal(pd_program_var_info(main, pd_tensor_name(b), &info), PD_OK);
  assert_false(info.persistable);
  pd_executor *exe = pd_static_executor(PD_CPU);
  pd_var_scope *scope = pd_static_scope();
  assert_int_equal(pd_executor_run(exe, startup, NULL, 0, NULL, 0, NULL, scope), PD_OK);
  EXPECT_VALUES(pd_var_scope_find_var(scope, "step_scale"), 0, 3.5, 3.5);
  assert_null(pd_var_scope_find_var(scope, pd_tensor_name(b)));
  pd_tensor *xv = T(PD_FLOAT64, 2, SHAPE(1, 2), 1, 2), *out = NULL;
  pd_static_feed feed = {"spec_x", xv};
  assert_int_equal(pd_executor_run(exe, main, &feed, 1, &y, 1, &out, scope), PD_OK);
  EXPECT_VALUES(out, 0, 2.5, 6.0);
  pd_tensor *ts[] = {x, g, b, xg, y, xv, out};
  for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) pd_tensor_release(ts[i]);
  pd_var_scope_release(scope);
  pd_executor_release(exe);
  pd_program_release(main);
  pd_program_release(startup);
}

static void test_clone_for_test_drops_training_ops(void **state) {
  (void)state;
  net n;
  build(&n, PD_FLOAT32);
  pd_static_block *gb = pd_program_global_block(n.main);
  gb->ops[1]->role = PD_OP_ROLE_OPTIMIZE; /* as minimize marks its updates */
  pd_program *c = pd_program_clone(n.main, false);
  pd_program *t = pd_program_clone(n.main, true);
  assert_int_equal(pd_static_block_num_ops(pd_program_global_block(c)), 2);
  assert_int_equal(pd_static_block_num_ops(pd_program_global_block(t)), 1);
  /* the same Variable handles fetch from the clone */
  assert_ptr_equal(pd_static_block_var(pd_program_global_block(c), "x"), n.x);
  pd_program_release(c);
  pd_program_release(t);
  release_net(&n);
}

static void test_name_scope_and_unique_names(void **state) {
  (void)state;
  pd_program *p = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(p, NULL), PD_OK);
  pd_tensor *x = pd_static_data("x", 1, SHAPE(4), PD_FLOAT32);
  pd_static_name_scope_begin("encoder");
  pd_tensor *a = pd_relu(x);
  pd_tensor *b = pd_relu(x);
  pd_static_name_scope_end();
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  assert_string_not_equal(pd_tensor_name(a), pd_tensor_name(b));
  char *s = pd_program_to_string(p);
  assert_non_null(strstr(s, "op_namescope = '/encoder/'"));
  free(s);
  pd_tensor_release(x);
  pd_tensor_release(a);
  pd_tensor_release(b);
  pd_program_release(p);
}

/* pd_ir_set_slot renames one input or output of an op and no other. */
static void test_set_slot_renames_one_slot(void **state) {
  (void)state;
  pd_program *p = pd_static_program();
  pd_static_block *b = pd_program_global_block(p);
  const char *ins[2] = {"a", "a"}, *outs[1] = {"c"};
  pd_operator *op = pd_ir_append_op(b, "add", ins, 2, outs, 1, NULL);
  assert_non_null(op);
  assert_int_equal(pd_ir_set_slot(&op->inputs[1], "a@MERGED"), PD_OK);
  assert_int_equal(pd_ir_set_slot(&op->outputs[0], "d"), PD_OK);
  assert_string_equal(op->inputs[0], "a");
  assert_string_equal(op->inputs[1], "a@MERGED");
  assert_string_equal(op->outputs[0], "d");
  pd_program_release(p);
}

/* A control or array op's kind is resolved from its type when it is
 * appended (the executor then compares no strings), and a clone keeps it. */
static void test_control_kind_resolved_on_append(void **state) {
  (void)state;
  pd_program *p = pd_static_program();
  pd_static_block *b = pd_program_global_block(p);
  const char *ins[2] = {"a", "b"}, *outs[1] = {"c"};
  static const struct {
    const char *type;
    pd_ctl_kind kind;
    bool grad;
  } cases[] = {{"while", PD_CTL_WHILE, false},
               {"while_grad", PD_CTL_WHILE, true},
               {"conditional_block", PD_CTL_COND, false},
               {"write_to_array", PD_CTL_WRITE_ARRAY, false},
               {"read_from_array_grad", PD_CTL_READ_ARRAY, true},
               {"array_add", PD_CTL_ARRAY_ADD, false},
               {"add", PD_CTL_NONE, false},
               {PD_STATIC_ASSIGN_VALUE, PD_CTL_NONE, false}};
  int n = (int)(sizeof cases / sizeof *cases);
  for (int i = 0; i < n; i++) {
    pd_operator *op = pd_ir_append_op(b, cases[i].type, ins, 2, outs, 1, NULL);
    assert_non_null(op);
    assert_int_equal(op->ctl, cases[i].kind);
    assert_int_equal(op->ctl_grad, cases[i].grad);
    if (cases[i].kind == PD_CTL_NONE) continue;
    const char *fwd = pd_static_control_type(op->ctl); /* the type, without "_grad" */
    assert_int_equal(strncmp(cases[i].type, fwd, strlen(fwd)), 0);
    assert_int_equal(strlen(cases[i].type), strlen(fwd) + (cases[i].grad ? 5 : 0));
  }
  pd_program *c = pd_program_clone(p, false);
  assert_non_null(c);
  for (int i = 0; i < n; i++) {
    assert_int_equal(c->blocks[0]->ops[i]->ctl, cases[i].kind);
    assert_int_equal(c->blocks[0]->ops[i]->ctl_grad, cases[i].grad);
  }
  pd_program_release(c);
  pd_program_release(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_control_kind_resolved_on_append),
      cmocka_unit_test(test_set_slot_renames_one_slot),
      cmocka_unit_test(test_records_ops_and_vars),
      cmocka_unit_test(test_prints_like_paddle),
      cmocka_unit_test(test_executor_matches_eager),
      cmocka_unit_test(test_executor_errors_name_the_variable),
      cmocka_unit_test(test_global_scope_by_default),
      cmocka_unit_test(test_guards_nest_and_restore),
      cmocka_unit_test(test_enable_static_records_into_defaults),
      cmocka_unit_test(test_to_tensor_under_guard_is_a_constant),
      cmocka_unit_test(test_global_vars_and_input_spec),
      cmocka_unit_test(test_clone_for_test_drops_training_ops),
      cmocka_unit_test(test_name_scope_and_unique_names),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
