/* Keyword arguments of layer calls: Paddle's forward(x, position_ids=None,
 * attention_mask=None) and RotaryEmbedding.forward(x, seq_len) written with
 * pd_layer_call_kw / pd_layer_kwargs; the errors for undeclared, repeated,
 * mistyped and NULL keywords; nesting; DataParallel passing them on. */
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

/* out = x + mask + 10 * position_ids, each term only when given. */
typedef struct {
  pd_layer base;
  pd_layer *inner; /* optional: called without keywords in forward */
  int saw_inner_kw;
} attn;

static int attn_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  (void)n_in;
  (void)max_out;
  attn *a = (attn *)self;
  const pd_kwargs *kw = pd_layer_kwargs(self);
  pd_tensor *pos, *mask;
  pd_status st = pd_kwargs_tensor(kw, "position_ids", &pos);
  if (st == PD_OK) st = pd_kwargs_tensor(kw, "attention_mask", &mask);
  if (st != PD_OK) return st;
  pd_tensor *y = in[0];
  if (a->inner) {
    y = pd_layer_call1(a->inner, y);
    /* the inner call did not change what this call sees */
    a->saw_inner_kw = pd_layer_kwargs(self) == kw;
  }
  if (mask) y = pd_add(y, mask);
  if (pos) y = pd_add(y, pd_multiply_scalar(pos, 10));
  out[0] = y == in[0] ? pd_clone(y, PD_NUM_DTYPES) : y;
  return out[0] ? 1 : pd_last_status();
}
static const pd_layer_type attn_type = {"Attention", attn_forward, NULL, NULL};
static const char *const attn_kw[] = {"position_ids", "attention_mask"};

static attn *attn_new(void) {
  attn *a = pd_layer_new(sizeof *a, &attn_type);
  assert_int_equal(pd_layer_declare_kwargs(&a->base, attn_kw, 2), PD_OK);
  return a;
}

/* RotaryEmbedding.forward(x, seq_len): the first seq_len rows of its table
 * (a non-persistable buffer), seq_len defaulting to x.shape[0]. */
static int rotary_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  (void)n_in;
  (void)max_out;
  int64_t seq_len;
  double scale;
  pd_status st = pd_kwargs_int(pd_layer_kwargs(self), "seq_len", pd_tensor_shape(in[0])[0], &seq_len);
  if (st == PD_OK) st = pd_kwargs_float(pd_layer_kwargs(self), "scale", 1.0, &scale);
  if (st != PD_OK) return st;
  pd_tensor *table = pd_layer_buffer(self, "cos_cached");
  out[0] =
      pd_multiply_scalar(pd_slice(table, 1, (int64_t[]){0}, (int64_t[]){0}, (int64_t[]){seq_len}), scale);
  return out[0] ? 1 : pd_last_status();
}
static const pd_layer_type rotary_type = {"RotaryEmbedding", rotary_forward, NULL, NULL};

static pd_layer *rotary_new(void) {
  pd_layer *r = pd_layer_new(sizeof(pd_layer), &rotary_type);
  pd_tensor *cos = T(PD_FLOAT32, 1, SHAPE(4), 1, 2, 3, 4);
  assert_int_equal(pd_layer_register_buffer(r, "cos_cached", cos, false), PD_OK);
  pd_tensor_release(cos);
  assert_int_equal(pd_layer_declare_kwargs(r, (const char *const[]){"seq_len", "scale"}, 2), PD_OK);
  return r;
}

static void test_optional_tensors(void **state) {
  (void)state;
  attn *a = attn_new();
  pd_tensor *x = T(PD_FLOAT32, 1, SHAPE(2), 1, 2);
  pd_tensor *mask = T(PD_FLOAT32, 1, SHAPE(2), -100, 0);
  pd_tensor *pos = T(PD_FLOAT32, 1, SHAPE(2), 0, 1);
  pd_scope_begin();
  /* no keywords: both None */
  EXPECT_VALUES(pd_layer_call1(&a->base, x), 0, 1, 2);
  /* explicit None, and a mask */
  EXPECT_VALUES(pd_layer_call1_kw(&a->base, x, PD_KWARGS(PD_KW_NONE("position_ids"))), 0, 1, 2);
  EXPECT_VALUES(pd_layer_call1_kw(&a->base, x, PD_KWARGS(PD_KW_TENSOR("attention_mask", mask))), 0, -99, 2);
  pd_tensor *out[2];
  int n = pd_layer_call_kw(&a->base, (pd_tensor *[]){x}, 1,
                           PD_KWARGS(PD_KW_TENSOR("position_ids", pos), PD_KW_TENSOR("attention_mask", mask)),
                           out, 2);
  assert_int_equal(n, 1);
  EXPECT_VALUES(out[0], 0, -99, 12);
  pd_scope_end();
  /* outside a call a layer sees no keywords */
  assert_int_equal(pd_layer_kwargs(&a->base)->n, 0);
  pd_tensor_release(x);
  pd_tensor_release(mask);
  pd_tensor_release(pos);
  pd_layer_release(&a->base);
  expect_no_live_tensors();
}

static void test_plain_values(void **state) {
  (void)state;
  pd_layer *r = rotary_new();
  pd_tensor *x = pd_zeros(1, SHAPE(3), PD_FLOAT32);
  pd_scope_begin();
  EXPECT_VALUES(pd_layer_call1(r, x), 0, 1, 2, 3);
  EXPECT_VALUES(pd_layer_call1_kw(r, x, PD_KWARGS(PD_KW_INT("seq_len", 2))), 0, 1, 2);
  /* an int is accepted where a float is read */
  EXPECT_VALUES(pd_layer_call1_kw(r, x, PD_KWARGS(PD_KW_INT("seq_len", 1), PD_KW_INT("scale", 3))), 0, 3);
  EXPECT_VALUES(pd_layer_call1_kw(r, x, PD_KWARGS(PD_KW_FLOAT("scale", 0.5))), 0, 0.5, 1, 1.5);
  /* a float where an int is read is an error naming the keyword */
  pd_clear_error();
  assert_null(pd_layer_call1_kw(r, x, PD_KWARGS(PD_KW_FLOAT("seq_len", 2.5))));
  assert_non_null(strstr(pd_last_error(), "'seq_len'"));
  assert_non_null(strstr(pd_last_error(), "expected an int, got a float"));
  pd_clear_error();
  pd_scope_end();
  pd_tensor_release(x);
  pd_layer_release(r);
  expect_no_live_tensors();
}

static void test_keyword_errors(void **state) {
  (void)state;
  attn *a = attn_new();
  pd_layer *plain = pd_nn_identity();
  pd_tensor *x = T(PD_FLOAT32, 1, SHAPE(2), 1, 2);
  pd_scope_begin();
  pd_clear_error();
  assert_null(pd_layer_call1_kw(&a->base, x, PD_KWARGS(PD_KW_NONE("attn_mask"))));
  assert_non_null(
      strstr(pd_last_error(), "Attention.forward() got an unexpected keyword argument 'attn_mask'"));
  pd_clear_error();
  assert_null(
      pd_layer_call1_kw(&a->base, x, PD_KWARGS(PD_KW_NONE("position_ids"), PD_KW_TENSOR("position_ids", x))));
  assert_non_null(strstr(pd_last_error(), "multiple values for keyword argument 'position_ids'"));
  pd_clear_error();
  /* an int where a tensor is read */
  assert_null(pd_layer_call1_kw(&a->base, x, PD_KWARGS(PD_KW_INT("attention_mask", 1))));
  assert_non_null(strstr(pd_last_error(), "'attention_mask': expected a tensor or None, got an int"));
  pd_clear_error();
  /* a layer that declared none */
  assert_null(pd_layer_call1_kw(plain, x, PD_KWARGS(PD_KW_INT("seq_len", 1))));
  assert_non_null(strstr(pd_last_error(), "unexpected keyword argument 'seq_len'"));
  pd_clear_error();
  /* a NULL tensor: the error of the op that failed is kept */
  pd_tensor *bad = pd_add(x, pd_zeros(1, SHAPE(3), PD_FLOAT32));
  assert_null(bad);
  assert_null(pd_layer_call1_kw(&a->base, x, PD_KWARGS(PD_KW_TENSOR("attention_mask", bad))));
  assert_non_null(strstr(pd_last_error(), "add"));
  pd_clear_error();
  assert_null(pd_layer_call1_kw(&a->base, x, PD_KWARGS(PD_KW_TENSOR("attention_mask", NULL))));
  assert_non_null(strstr(pd_last_error(), "PD_KW_NONE"));
  pd_clear_error();
  assert_int_equal(pd_layer_declare_kwargs(NULL, attn_kw, 2), PD_ERR_INVALID);
  assert_int_equal(pd_layer_declare_kwargs(plain, NULL, 2), PD_ERR_INVALID);
  assert_int_equal(pd_layer_declare_kwargs(plain, (const char *const[]){"a", NULL}, 2), PD_ERR_INVALID);
  pd_clear_error();
  pd_scope_end();
  pd_tensor_release(x);
  pd_layer_release(plain);
  pd_layer_release(&a->base);
  expect_no_live_tensors();
}

static void test_nesting_and_data_parallel(void **state) {
  (void)state;
  attn *a = attn_new();
  a->inner = pd_layer_add_sublayer(&a->base, "inner", pd_nn_identity());
  pd_tensor *x = T(PD_FLOAT32, 1, SHAPE(2), 1, 2);
  pd_tensor *mask = T(PD_FLOAT32, 1, SHAPE(2), 5, 5);
  pd_scope_begin();
  EXPECT_VALUES(pd_layer_call1_kw(&a->base, x, PD_KWARGS(PD_KW_TENSOR("attention_mask", mask))), 0, 6, 7);
  assert_int_equal(a->saw_inner_kw, 1);
  pd_scope_end();
  /* DataParallel (one rank) passes keywords to the layer it wraps */
  unsetenv("PADDLE_TRAINERS_NUM");
  unsetenv("PADDLE_TRAINER_ID");
  pd_layer *dp = pd_data_parallel(&a->base, NULL);
  assert_non_null(dp);
  pd_scope_begin();
  EXPECT_VALUES(pd_layer_call1_kw(dp, x, PD_KWARGS(PD_KW_TENSOR("attention_mask", mask))), 0, 6, 7);
  pd_clear_error();
  assert_null(pd_layer_call1_kw(dp, x, PD_KWARGS(PD_KW_NONE("bogus"))));
  assert_non_null(strstr(pd_last_error(), "unexpected keyword argument 'bogus'"));
  pd_clear_error();
  pd_scope_end();
  pd_layer_release(dp);
  pd_tensor_release(x);
  pd_tensor_release(mask);
  pd_layer_release(&a->base);
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_optional_tensors),
      cmocka_unit_test(test_plain_values),
      cmocka_unit_test(test_keyword_errors),
      cmocka_unit_test(test_nesting_and_data_parallel),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
