/* Tensor arrays (create_array, array_write, array_read, array_length,
 * tensor_array_to_tensor) eagerly and in Programs, and the fluid While
 * block that fills one: values and gradients against hand-derived ones. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "paddlec/static.h"
#include "paddlec/static_control.h"
#include "paddlec/tensor_array.h"
#include "static/control_plan.h"
#include "static/static_internal.h"
#include "test_util.h"

static pd_tensor *scalar(double v, pd_dtype dt) { return pd_full(1, SHAPE(1), v, dt); }

/* ---- eager ------------------------------------------------------------------- */
/* Paddle's list: writes at 0 and 1 (1 appends), an overwrite of 0, reads,
 * the length, concat and stack with their index tensors; a write past the
 * end and a read of a tensor are errors. */
static void test_eager_array(void **state) {
  (void)state;
  pd_tensor *a = T(PD_FLOAT32, 2, SHAPE(1, 2), 1, 2), *b = T(PD_FLOAT32, 2, SHAPE(1, 2), 3, 4);
  pd_tensor *c = T(PD_FLOAT32, 2, SHAPE(1, 2), 5, 6);
  pd_tensor *i0 = scalar(0, PD_INT64), *i1 = scalar(1, PD_INT64), *i3 = scalar(3, PD_INT64);
  pd_tensor *arr = pd_create_array(PD_FLOAT32, &a, 1);
  assert_true(pd_tensor_is_array(arr) && !pd_tensor_is_array(a));
  pd_tensor *r1 = pd_array_write(b, i1, arr); /* appends */
  assert_ptr_equal(r1, arr);                  /* the same list, changed in place */
  pd_tensor *len = pd_array_length(arr), *e1 = pd_array_read(arr, i1);
  assert_true(pd_tensor_item(len) == 2.0 && pd_tensor_ndim(len) == 0);
  assert_ptr_equal(e1, b); /* the element is the tensor written */
  pd_tensor *idx = NULL, *cat = pd_tensor_array_to_tensor(arr, 1, false, &idx);
  EXPECT_VALUES(cat, 0, 1, 2, 3, 4);
  EXPECT_VALUES(idx, 0, 2, 2);
  assert_true(pd_tensor_dtype(idx) == PD_INT32);
  pd_tensor *r0 = pd_array_write(c, i0, arr), *idx2 = NULL,
            *st = pd_tensor_array_to_tensor(arr, 0, true, &idx2);
  assert_true(pd_tensor_ndim(st) == 3 && pd_tensor_shape(st)[0] == 2);
  EXPECT_VALUES(st, 0, 5, 6, 3, 4);
  EXPECT_VALUES(idx2, 0, 1, 1);
  expect_error(pd_array_write(a, i3, arr), "index 3 is past the end of an array of length 2", NULL);
  expect_error(pd_array_read(arr, i3), "index 3 of an array of length 2 is out of range", NULL);
  expect_error(pd_array_read(a, i0), "is a tensor, not a tensor array", NULL);
  pd_tensor *empty = pd_create_array(PD_FLOAT32, NULL, 0);
  expect_error(pd_tensor_array_to_tensor(empty, 0, false, NULL), "the array is empty", NULL);
  pd_tensor *fresh = pd_array_write(a, i0, NULL); /* array NULL: a new one */
  pd_tensor *flen = pd_array_length(fresh);
  assert_true(pd_tensor_item(flen) == 1.0);
  pd_tensor *all[] = {a, b, c, i0, i1, i3, arr, r1, len, e1, idx, cat, r0, idx2, st, empty, fresh, flen};
  for (size_t k = 0; k < sizeof all / sizeof *all; k++) pd_tensor_release(all[k]);
}

/* Autograd follows a tensor through the array: y = sum(concat(2x, 3x))
 * gives dy/dx = 5. */
static void test_eager_array_gradient(void **state) {
  (void)state;
  pd_tensor *x = T(PD_FLOAT64, 1, SHAPE(2), 1, 2);
  pd_tensor_set_stop_gradient(x, false);
  pd_tensor *x2 = pd_scale(x, 2, 0, true), *x3 = pd_scale(x, 3, 0, true), *i0 = scalar(0, PD_INT64);
  pd_tensor *i1 = scalar(1, PD_INT64), *arr = pd_array_write(x2, i0, NULL), *r = pd_array_write(x3, i1, arr);
  pd_tensor *cat = pd_tensor_array_to_tensor(arr, 0, false, NULL), *y = pd_sum(cat, NULL, 0, false);
  assert_int_equal(pd_backward(y, NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(x), 0, 5, 5);
  pd_tensor *all[] = {x, x2, x3, i0, i1, arr, r, cat, y};
  for (size_t k = 0; k < sizeof all / sizeof *all; k++) pd_tensor_release(all[k]);
}

/* ---- Programs ------------------------------------------------------------------ */
static pd_tensor **run(pd_program *p, bool interpret, const pd_static_feed *feed, int n_feed,
                       pd_tensor **fetch, int n) {
  pd_executor *exe = pd_static_executor(PD_CPU);
  pd_executor_set_interpret(exe, interpret);
  pd_var_scope *scope = pd_static_scope();
  static pd_tensor *out[8];
  if (pd_executor_run(exe, p, feed, n_feed, fetch, n, out, scope) != PD_OK)
    fail_msg("run: %s", pd_last_error());
  /* not interpreted: the control ops ran lowered, through sub-plans */
  if (!interpret && (!pd_executor_lowered_program(exe) || !pd_executor_control_stats(exe)))
    fail_msg("the program was not lowered");
  pd_var_scope_release(scope);
  pd_executor_release(exe);
  return out;
}

static void release_all(pd_tensor **t, int n) {
  for (int i = 0; i < n; i++) pd_tensor_release(t[i]);
}

/* The classic fluid pattern: i = 0; arr = create_array; while i < n:
 * array_write(x * (i + 1), i, arr); i = increment(i); cond = i < n. Then
 * tensor_array_to_tensor stacks [x, 2x, 3x] for n = 3, array_length is 3
 * and the handle i reads 3. The Program holds one while op; it runs
 * lowered or not, from a clone and from its file. */
typedef struct fill {
  pd_program *main;
  pd_tensor *x, *n, *i, *arr, *cond, *stacked, *index, *cat, *len;
} fill;

static void build_fill(fill *f) {
  f->main = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(f->main, NULL), PD_OK);
  f->x = pd_static_data("x", 1, SHAPE(2), PD_FLOAT64);
  f->n = pd_static_data("n", 1, SHAPE(1), PD_INT64);
  f->i = pd_full(1, SHAPE(1), 0, PD_INT64);
  f->arr = pd_create_array(PD_FLOAT64, NULL, 0);
  f->cond = pd_less_than(f->i, f->n);
  assert_int_equal(pd_static_while_begin(f->cond), PD_OK);
  {
    pd_tensor *i1 = pd_increment(f->i, 1), *fi = pd_cast(i1, PD_FLOAT64), *y = pd_multiply(f->x, fi);
    pd_tensor *w = pd_array_write(y, f->i, f->arr);
    assert_non_null(w);
    assert_int_equal(pd_static_assign_to(i1, f->i), PD_OK);
    pd_tensor *c = pd_less_than(f->i, f->n); /* reads the new i */
    assert_int_equal(pd_static_assign_to(c, f->cond), PD_OK);
    pd_tensor *tmp[] = {i1, fi, y, w, c};
    release_all(tmp, 5);
  }
  assert_int_equal(pd_static_while_end(), PD_OK);
  f->stacked = pd_tensor_array_to_tensor(f->arr, 0, true, &f->index);
  f->cat = pd_tensor_array_to_tensor(f->arr, 0, false, NULL);
  f->len = pd_array_length(f->arr);
  assert_non_null(f->stacked);
  assert_non_null(f->cat);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
}

static void check_fill(pd_program *p, fill *f, bool interpret) {
  pd_tensor *xv = T(PD_FLOAT64, 1, SHAPE(2), 1, -2), *nv = scalar(3, PD_INT64);
  pd_static_feed feed[2] = {{"x", xv}, {"n", nv}};
  pd_tensor *fetch[6] = {f->stacked, f->index, f->cat, f->len, f->i, f->cond};
  pd_tensor **o = run(p, interpret, feed, 2, fetch, 6);
  assert_true(pd_tensor_ndim(o[0]) == 2 && pd_tensor_shape(o[0])[0] == 3);
  EXPECT_VALUES(o[0], 0, 1, -2, 2, -4, 3, -6);
  EXPECT_VALUES(o[1], 0, 1, 1, 1);
  EXPECT_VALUES(o[2], 0, 1, -2, 2, -4, 3, -6);
  assert_true(pd_tensor_item(o[3]) == 3.0 && pd_tensor_item(o[4]) == 3.0 && pd_tensor_item(o[5]) == 0.0);
  release_all(o, 6);
  pd_tensor_release(xv);
  pd_tensor_release(nv);
}

static void free_fill(fill *f) {
  pd_tensor *all[] = {f->x, f->n, f->i, f->arr, f->cond, f->stacked, f->index, f->cat, f->len};
  release_all(all, 9);
  pd_program_release(f->main);
}

static void test_while_block_fills_array(void **state) {
  (void)state;
  fill f;
  build_fill(&f);
  pd_static_block *gb = pd_program_global_block(f.main);
  int whiles = 0;
  for (int k = 0; k < pd_static_block_num_ops(gb); k++)
    whiles += strcmp(pd_static_block_op_type(gb, k), "while") == 0;
  assert_int_equal(whiles, 1);
  check_fill(f.main, &f, false);
  check_fill(f.main, &f, true);
  pd_program *copy = pd_program_clone(f.main, false);
  check_fill(copy, &f, false);
  pd_program_release(copy);
  char *text = pd_program_to_string(f.main);
  assert_non_null(strstr(text, "LOD_TENSOR_ARRAY"));
  assert_non_null(strstr(text, "= while(inputs="));
  assert_non_null(strstr(text, "sub_block = block[1]"));
  assert_non_null(strstr(text, "axis = 0, use_stack = 1"));
  free(text);
  /* from its Program file: the same values, fetched by name */
  size_t size = 0;
  char *file = pd_static_serialize_program(f.main, &size);
  assert_non_null(file);
  assert_non_null(strstr(file, "\"type\":\"LOD_TENSOR_ARRAY\""));
  pd_program *back = pd_static_deserialize_program(file, size);
  free(file);
  if (!back) fail_msg("%s", pd_last_error());
  fill g = {.main = back};
  pd_tensor **src[] = {&f.stacked, &f.index, &f.cat, &f.len, &f.i, &f.cond};
  pd_tensor **dst[] = {&g.stacked, &g.index, &g.cat, &g.len, &g.i, &g.cond};
  for (int k = 0; k < 6; k++)
    assert_non_null(*dst[k] = pd_static_block_var(pd_program_global_block(back), pd_tensor_name(*src[k])));
  check_fill(back, &g, false);
  pd_program_release(back);
  free_fill(&f);
}

/* A while_loop carrying an array: (i, arr) -> (i + 1, array_write(x * i,
 * i, arr)) for i < 3, then concat: [0, 0, x, 2x]... for x of one element,
 * [0, x, 2x]. */
typedef struct arr_ctx {
  pd_tensor *x;
} arr_ctx;
static pd_tensor *below_3(void *user, pd_tensor *const *v, int n) {
  (void)user;
  (void)n;
  pd_tensor *three = scalar(3, PD_INT64), *c = pd_less_than(v[0], three);
  pd_tensor_release(three);
  return c;
}
static pd_status write_body(void *user, pd_tensor *const *v, int n, pd_tensor **next) {
  (void)n;
  pd_tensor *fi = pd_cast(v[0], PD_FLOAT64), *y = pd_multiply(((arr_ctx *)user)->x, fi);
  next[1] = pd_array_write(y, v[0], v[1]);
  next[0] = pd_increment(v[0], 1);
  pd_tensor_release(fi);
  pd_tensor_release(y);
  return next[0] && next[1] ? PD_OK : pd_last_status();
}

static void test_while_loop_carries_array(void **state) {
  (void)state;
  pd_program *main = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(main, NULL), PD_OK);
  pd_tensor *x = pd_static_data("x", 1, SHAPE(1), PD_FLOAT64);
  pd_tensor *i0 = scalar(0, PD_INT64), *arr = pd_create_array(PD_FLOAT64, NULL, 0), *vars[2] = {i0, arr};
  pd_tensor *out[2] = {0};
  arr_ctx c = {x};
  assert_int_equal(pd_static_nn_while_loop(below_3, write_body, &c, vars, 2, out), PD_OK);
  assert_true(pd_tensor_is_array(out[1]));
  pd_tensor *cat = pd_tensor_array_to_tensor(out[1], 0, false, NULL);
  pd_tensor *two = scalar(2, PD_INT64), *last = pd_array_read(out[1], two);
  if (!cat || !last) fail_msg("%s", pd_last_error());
  /* a registry op refuses an array */
  expect_error(pd_add(out[1], x), "is a tensor array; read an element with array_read", NULL);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  pd_tensor *xv = scalar(1.5, PD_FLOAT64);
  pd_static_feed feed[1] = {{"x", xv}};
  pd_tensor *fetch[3] = {cat, last, out[0]};
  pd_tensor **o = run(main, false, feed, 1, fetch, 3);
  EXPECT_VALUES(o[0], 0, 0, 1.5, 3);
  assert_true(pd_tensor_item(o[1]) == 3.0 && pd_tensor_item(o[2]) == 3.0);
  release_all(o, 3);
  pd_tensor *all[] = {x, i0, arr, out[0], out[1], cat, two, last, xv};
  release_all(all, 9);
  pd_program_release(main);
}

/* Gradients through a fluid While: s = x; while i < 3: s = s * w; i += 1
 * gives s = x w^3, ds/dw = 3 x w^2 and ds/dx = w^3 (w = 1.5, x = 2). */
static void test_while_block_gradient(void **state) {
  (void)state;
  pd_program *main = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(main, NULL), PD_OK);
  pd_tensor *x = pd_static_data("x", 1, SHAPE(1), PD_FLOAT64),
            *w = pd_static_data("w", 1, SHAPE(1), PD_FLOAT64);
  pd_tensor_set_stop_gradient(x, false);
  pd_tensor_set_stop_gradient(w, false);
  pd_tensor *s = pd_assign(x), *i = pd_full(1, SHAPE(1), 0, PD_INT64), *three = scalar(3, PD_INT64);
  pd_tensor *cond = pd_less_than(i, three);
  assert_int_equal(pd_static_while_begin(cond), PD_OK);
  {
    pd_tensor *sw = pd_multiply(s, w), *i1 = pd_increment(i, 1);
    assert_int_equal(pd_static_assign_to(sw, s), PD_OK);
    assert_int_equal(pd_static_assign_to(i1, i), PD_OK);
    pd_tensor *c = pd_less_than(i, three);
    assert_int_equal(pd_static_assign_to(c, cond), PD_OK);
    pd_tensor *tmp[] = {sw, i1, c};
    release_all(tmp, 3);
  }
  assert_int_equal(pd_static_while_end(), PD_OK);
  pd_tensor *wrt[2] = {x, w}, *g[2] = {0};
  assert_int_equal(pd_static_gradients(&s, 1, wrt, 2, NULL, NULL, 0, g), PD_OK);
  assert_true(g[0] && g[1]);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  pd_tensor *xv = scalar(2, PD_FLOAT64), *wv = scalar(1.5, PD_FLOAT64);
  pd_static_feed feed[2] = {{"x", xv}, {"w", wv}};
  pd_tensor *fetch[4] = {s, g[0], g[1], i};
  for (int interp = 0; interp < 2; interp++) {
    pd_tensor **o = run(main, interp, feed, 2, fetch, 4);
    assert_true(pd_tensor_item(o[0]) == 2 * 1.5 * 1.5 * 1.5);
    assert_true(pd_tensor_item(o[1]) == 1.5 * 1.5 * 1.5);
    assert_true(pd_tensor_item(o[2]) == 3 * 2 * 1.5 * 1.5);
    assert_true(pd_tensor_item(o[3]) == 3.0);
    release_all(o, 4);
  }
  pd_tensor *all[] = {x, w, s, i, three, cond, g[0], g[1], xv, wv};
  release_all(all, 10);
  pd_program_release(main);
}

/* Gradients across recorded array ops: arr = [2x, 3x]; loss = sum(concat
 * (arr)) + sum(arr[1]) gives dloss/dx = 2 + 3 + 3 = 8 per element. */
static void test_array_gradient(void **state) {
  (void)state;
  pd_program *main = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(main, NULL), PD_OK);
  pd_tensor *x = pd_static_data("x", 1, SHAPE(2), PD_FLOAT64);
  pd_tensor_set_stop_gradient(x, false);
  pd_tensor *x2 = pd_scale(x, 2, 0, true), *x3 = pd_scale(x, 3, 0, true);
  pd_tensor *i0 = pd_full(1, SHAPE(1), 0, PD_INT64), *i1 = pd_full(1, SHAPE(1), 1, PD_INT64);
  pd_tensor *arr = pd_array_write(x2, i0, NULL), *w = pd_array_write(x3, i1, arr);
  pd_tensor *cat = pd_tensor_array_to_tensor(arr, 0, false, NULL), *r = pd_array_read(arr, i1);
  pd_tensor *s1 = pd_sum(cat, NULL, 0, false), *s2 = pd_sum(r, NULL, 0, false), *loss = pd_add(s1, s2);
  pd_tensor *gx = NULL;
  assert_int_equal(pd_static_gradients(&loss, 1, &x, 1, NULL, NULL, 0, &gx), PD_OK);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  pd_tensor *xv = T(PD_FLOAT64, 1, SHAPE(2), 1, -1);
  pd_static_feed feed[1] = {{"x", xv}};
  pd_tensor *fetch[2] = {loss, gx};
  pd_tensor **o = run(main, false, feed, 1, fetch, 2);
  assert_true(pd_tensor_item(o[0]) == 0.0);
  EXPECT_VALUES(o[1], 0, 8, 8);
  release_all(o, 2);
  pd_tensor *all[] = {x, x2, x3, i0, i1, arr, w, cat, r, s1, s2, loss, gx, xv};
  release_all(all, 14);
  pd_program_release(main);
}

/* The fluid pattern differentiated: loss = sum(stack([x, 2x, 3x])) written
 * by the While gives dloss/dx = 6 per element (5050 for 100 steps); the
 * same through a while_loop carrying the array ([0, x, 2x]): 3. */
static void test_while_array_gradient(void **state) {
  (void)state;
  pd_program *main = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(main, NULL), PD_OK);
  pd_tensor *x = pd_static_data("x", 1, SHAPE(2), PD_FLOAT64),
            *n = pd_static_data("n", 1, SHAPE(1), PD_INT64);
  pd_tensor_set_stop_gradient(x, false);
  pd_tensor *i = pd_full(1, SHAPE(1), 0, PD_INT64), *arr = pd_create_array(PD_FLOAT64, NULL, 0);
  pd_tensor *cond = pd_less_than(i, n);
  assert_int_equal(pd_static_while_begin(cond), PD_OK);
  {
    pd_tensor *i1 = pd_increment(i, 1), *fi = pd_cast(i1, PD_FLOAT64), *y = pd_multiply(x, fi);
    pd_tensor *w = pd_array_write(y, i, arr), *c = pd_less_than(i1, n);
    assert_int_equal(pd_static_assign_to(i1, i), PD_OK);
    assert_int_equal(pd_static_assign_to(c, cond), PD_OK);
    pd_tensor *tmp[] = {i1, fi, y, w, c};
    release_all(tmp, 5);
  }
  assert_int_equal(pd_static_while_end(), PD_OK);
  pd_tensor *st = pd_tensor_array_to_tensor(arr, 0, true, NULL), *loss = pd_sum(st, NULL, 0, false),
            *gx = NULL;
  assert_int_equal(pd_static_gradients(&loss, 1, &x, 1, NULL, NULL, 0, &gx), PD_OK);
  /* the same through while_loop */
  pd_tensor *i0 = scalar(0, PD_INT64), *a0 = pd_create_array(PD_FLOAT64, NULL, 0), *vars[2] = {i0, a0},
            *out[2];
  arr_ctx c = {x};
  assert_int_equal(pd_static_nn_while_loop(below_3, write_body, &c, vars, 2, out), PD_OK);
  pd_tensor *cat = pd_tensor_array_to_tensor(out[1], 0, false, NULL), *loss2 = pd_sum(cat, NULL, 0, false);
  pd_tensor *gx2 = NULL;
  assert_int_equal(pd_static_gradients(&loss2, 1, &x, 1, NULL, NULL, 0, &gx2), PD_OK);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  pd_tensor *xv = T(PD_FLOAT64, 1, SHAPE(2), 1, -2), *nv = scalar(3, PD_INT64);
  pd_static_feed feed[2] = {{"x", xv}, {"n", nv}};
  pd_tensor *fetch[4] = {loss, gx, loss2, gx2};
  pd_tensor **o = run(main, false, feed, 2, fetch, 4);
  assert_true(pd_tensor_item(o[0]) == -6.0 && pd_tensor_item(o[2]) == -3.0);
  EXPECT_VALUES(o[1], 0, 6, 6);
  EXPECT_VALUES(o[3], 0, 3, 3);
  release_all(o, 4);
  /* 100 steps: an array of 100 elements, the gradient 1 + 2 + ... + 100 */
  pd_tensor_release(nv);
  nv = feed[1].value = scalar(100, PD_INT64);
  o = run(main, false, feed, 2, fetch, 2);
  assert_true(pd_tensor_item(o[0]) == -5050.0);
  EXPECT_VALUES(o[1], 0, 5050, 5050);
  release_all(o, 2);
  pd_tensor *all[] = {x, n, i, arr, cond, st, loss, gx, i0, a0, out[0], out[1], cat, loss2, gx2, xv, nv};
  release_all(all, 17);
  pd_program_release(main);
}

/* Nested While blocks with a cond inside: for i < 3: j = 0; for j < 2:
 * acc += cond(i > 0, x * i, x); so acc = 2 (x + x + 2x) = 8x, d acc/dx = 8,
 * and j, i end at 2 and 3. */
typedef struct nest_ctx {
  pd_tensor *x, *i;
} nest_ctx;
static int times_i(void *user, pd_tensor **out, int cap) {
  (void)cap;
  nest_ctx *c = user;
  pd_tensor *fi = pd_cast(c->i, PD_FLOAT64);
  out[0] = pd_multiply(c->x, fi);
  pd_tensor_release(fi);
  return out[0] ? 1 : -1;
}
static int just_x(void *user, pd_tensor **out, int cap) {
  (void)cap;
  out[0] = pd_assign(((nest_ctx *)user)->x);
  return out[0] ? 1 : -1;
}

static void test_nested_while_blocks(void **state) {
  (void)state;
  pd_program *main = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(main, NULL), PD_OK);
  pd_tensor *x = pd_static_data("x", 1, SHAPE(1), PD_FLOAT64);
  pd_tensor_set_stop_gradient(x, false);
  pd_tensor *acc = pd_full(1, SHAPE(1), 0, PD_FLOAT64), *i = pd_full(1, SHAPE(1), 0, PD_INT64);
  pd_tensor *j = pd_full(1, SHAPE(1), 0, PD_INT64), *three = scalar(3, PD_INT64), *two = scalar(2, PD_INT64);
  pd_tensor *zero = scalar(0, PD_INT64), *ci = pd_less_than(i, three), *cj = pd_less_than(j, two);
  assert_int_equal(pd_static_while_begin(ci), PD_OK);
  {
    pd_tensor *j0 = pd_full(1, SHAPE(1), 0, PD_INT64), *c0 = pd_less_than(j0, two);
    assert_int_equal(pd_static_assign_to(j0, j), PD_OK);
    assert_int_equal(pd_static_assign_to(c0, cj), PD_OK);
    assert_int_equal(pd_static_while_begin(cj), PD_OK);
    {
      pd_tensor *pos = pd_greater_than(i, zero), *term = NULL;
      nest_ctx c = {x, i};
      assert_int_equal(pd_static_nn_cond(pos, times_i, just_x, &c, &term, 1), 1);
      pd_tensor *sum = pd_add(acc, term), *j1 = pd_increment(j, 1), *c1 = pd_less_than(j1, two);
      assert_int_equal(pd_static_assign_to(sum, acc), PD_OK);
      assert_int_equal(pd_static_assign_to(j1, j), PD_OK);
      assert_int_equal(pd_static_assign_to(c1, cj), PD_OK);
      pd_tensor *tmp[] = {pos, term, sum, j1, c1};
      release_all(tmp, 5);
    }
    assert_int_equal(pd_static_while_end(), PD_OK);
    pd_tensor *i1 = pd_increment(i, 1), *c2 = pd_less_than(i1, three);
    assert_int_equal(pd_static_assign_to(i1, i), PD_OK);
    assert_int_equal(pd_static_assign_to(c2, ci), PD_OK);
    pd_tensor *tmp[] = {j0, c0, i1, c2};
    release_all(tmp, 4);
  }
  assert_int_equal(pd_static_while_end(), PD_OK);
  pd_tensor *gx = NULL;
  assert_int_equal(pd_static_gradients(&acc, 1, &x, 1, NULL, NULL, 0, &gx), PD_OK);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  pd_tensor *xv = scalar(1.5, PD_FLOAT64);
  pd_static_feed feed[1] = {{"x", xv}};
  pd_tensor *fetch[4] = {acc, gx, i, j};
  pd_tensor **o = run(main, false, feed, 1, fetch, 4);
  assert_true(pd_tensor_item(o[0]) == 8 * 1.5 && pd_tensor_item(o[1]) == 8.0);
  assert_true(pd_tensor_item(o[2]) == 3.0 && pd_tensor_item(o[3]) == 2.0);
  release_all(o, 4);
  /* the nested blocks from the Program file, interpreted the same */
  size_t size = 0;
  char *file = pd_static_serialize_program(main, &size);
  pd_program *back = file ? pd_static_deserialize_program(file, size) : NULL;
  free(file);
  if (!back) fail_msg("%s", pd_last_error());
  pd_tensor *bf[2];
  for (int k = 0; k < 2; k++)
    assert_non_null(bf[k] = pd_static_block_var(pd_program_global_block(back), pd_tensor_name(fetch[k])));
  o = run(back, true, feed, 1, bf, 2);
  assert_true(pd_tensor_item(o[0]) == 8 * 1.5 && pd_tensor_item(o[1]) == 8.0);
  release_all(o, 2);
  pd_program_release(back);
  pd_tensor *all[] = {x, acc, i, j, three, two, zero, ci, cj, gx, xv};
  release_all(all, 11);
  pd_program_release(main);
}

/* ---- bad input -------------------------------------------------------------------- */
static int writes_outer(void *user, pd_tensor **out, int cap) {
  (void)cap;
  pd_tensor *one = scalar(1, PD_FLOAT64);
  out[0] = pd_static_assign_to(one, user) == PD_OK ? pd_assign(user) : NULL;
  pd_tensor_release(one);
  return out[0] ? 1 : -1;
}

static void test_errors(void **state) {
  (void)state;
  pd_program *main = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(main, NULL), PD_OK);
  pd_tensor *x = pd_static_data("x", 1, SHAPE(1), PD_FLOAT64), *i = pd_full(1, SHAPE(1), 0, PD_INT64);
  pd_tensor *arr = pd_create_array(PD_FLOAT32, NULL, 0), *f = pd_full(1, SHAPE(2), 0, PD_FLOAT64);
  expect_error(pd_array_write(x, i, arr), "holds float32, x", NULL);
  expect_error(pd_array_write(x, f, NULL), "the index must be one int64", NULL);
  expect_error(pd_array_read(x, i), "is no tensor array of the Program", NULL);
  pd_tensor *ten = scalar(10, PD_INT64), *cond = pd_less_than(i, ten);
  assert_int_equal(pd_static_while_begin(cond), PD_OK);
  pd_tensor *i1 = pd_increment(i, 1);
  assert_int_equal(pd_static_assign_to(i1, i), PD_OK);
  assert_int_not_equal(pd_static_while_end(), PD_OK); /* cond never written: it would not end */
  assert_non_null(strstr(pd_last_error(), "never writes its condition"));
  pd_tensor *zero = scalar(0, PD_FLOAT64), *pred = pd_greater_than(x, zero), *y = NULL;
  assert_true(pd_static_nn_cond(pred, writes_outer, writes_outer, x, &y, 1) < 0);
  assert_non_null(strstr(pd_last_error(), "a cond branch or while_loop body cannot write it"));
  assert_int_not_equal(pd_static_while_end(), PD_OK); /* none open */
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  pd_tensor *all[] = {x, i, arr, f, ten, cond, i1, zero, pred};
  release_all(all, 9);
  pd_program_release(main);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_eager_array),
      cmocka_unit_test(test_eager_array_gradient),
      cmocka_unit_test(test_while_block_fills_array),
      cmocka_unit_test(test_while_loop_carries_array),
      cmocka_unit_test(test_while_block_gradient),
      cmocka_unit_test(test_array_gradient),
      cmocka_unit_test(test_while_array_gradient),
      cmocka_unit_test(test_nested_while_blocks),
      cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
