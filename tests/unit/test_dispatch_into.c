/* pd_dispatch_into, the compiled executor's way to run an op into buffers it
 * planned: for every op sample of the registry that computes fresh outputs,
 * writing into caller-made tensors (over stale bytes) gives the bits the
 * ordinary dispatch gives; and wrong outputs are refused naming the op. */
#include <string.h>

#include "op_samples.h"
#include "test_util.h"

static pd_tensor *stale_like(const pd_tensor *t) {
  pd_tensor *o = pd_tensor_new(t->dtype, t->ndim, t->shape);
  if (o) memset(pd_tensor_data(o), 0x5a, (size_t)t->numel * pd_dtype_size(t->dtype)); /* not zeros */
  return o;
}

static void test_every_sample_matches_dispatch(void **state) {
  (void)state;
  int checked = 0;
  for (const pd_op_sample *const *tab = pd_sample_tables; *tab; tab++)
    for (const pd_op_sample *s = *tab; s->op; s++) {
      int id = pd_op_find(s->op);
      assert_true(id >= 0);
      const pd_op_def *def = pd_op_table[id];
      if (def->flags & (PD_OPF_VIEW | PD_OPF_INPLACE)) continue;
      pd_tensor *in[16] = {0};
      pd_attrs a = {0};
      sample_reseed(7);
      int n_in = s->make(in, &a);
      assert_true(n_in >= 0);
      /* a recorded Program holds its casts as ops: run the samples that need
       * none (the dispatch converts the others itself) */
      pd_tensor *want[PD_MAX_OUTPUTS];
      int n_out = 0;
      pd_seed(11);
      bool prev = pd_grad_mode_set(false);
      pd_status st = pd_dispatch((pd_op_id)id, in, n_in, &a, want, &n_out);
      pd_grad_mode_set(prev);
      if (st != PD_OK) fail_msg("%s: the sample fails to dispatch: %s", s->op, pd_last_error());
      pd_tensor *got[PD_MAX_OUTPUTS];
      for (int k = 0; k < n_out; k++) got[k] = stale_like(want[k]);
      pd_seed(11);
      st = pd_dispatch_into((pd_op_id)id, in, n_in, &a, got, n_out);
      if (st == PD_OK) {
        for (int k = 0; k < n_out; k++) {
          pd_tensor *w = pd_contiguous(want[k]);
          size_t bytes = (size_t)w->numel * pd_dtype_size(w->dtype);
          if (memcmp(pd_tensor_data(w), pd_tensor_data(got[k]), bytes) != 0)
            fail_msg("%s: output %d written into a given tensor differs from the dispatched one", s->op, k);
          pd_tensor_release(w);
        }
        checked++;
      } else {
        /* only a sample whose inputs the dispatcher converts may be refused */
        pd_clear_error();
        bool converts = def->flags & (PD_OPF_PROMOTE | PD_OPF_FLOAT_ONLY | PD_OPF_HALF_VIA_F32);
        if (!converts) fail_msg("%s: refused to write into its outputs", s->op);
      }
      for (int k = 0; k < n_out; k++) pd_tensor_release(want[k]), pd_tensor_release(got[k]);
      for (int i = 0; i < n_in; i++) pd_tensor_release(in[i]);
    }
  print_message("%d samples written into given outputs\n", checked);
  assert_true(checked > 100);
  expect_no_live_tensors();
}

static void expect_refused(pd_status st, const char *text) {
  assert_true(st != PD_OK);
  if (!strstr(pd_last_error(), text)) fail_msg("error '%s' should hold '%s'", pd_last_error(), text);
  pd_clear_error();
}

static void test_wrong_outputs_refused(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = pd_ones(2, SHAPE(2, 3), PD_FLOAT32), *y = pd_ones(2, SHAPE(2, 3), PD_FLOAT32);
  pd_tensor *in[2] = {x, y};
  pd_tensor *small = pd_zeros(2, SHAPE(3, 2), PD_FLOAT32), *f64 = pd_zeros(2, SHAPE(2, 3), PD_FLOAT64);
  pd_tensor *ok = pd_zeros(2, SHAPE(2, 3), PD_FLOAT32);
  expect_refused(
      pd_dispatch_into(PD_OP_add, in, 2, NULL, &small, 1),
      "add: output 0 must be a contiguous float32 tensor of shape [2, 3]; the one given is float32 "
      "of shape [3, 2]");
  expect_refused(pd_dispatch_into(PD_OP_add, in, 2, NULL, &f64, 1), "the one given is float64");
  pd_tensor *two[2] = {ok, ok};
  expect_refused(pd_dispatch_into(PD_OP_add, in, 2, NULL, two, 2), "add: writes 1 outputs, 2 given");
  pd_tensor *none = NULL;
  expect_refused(pd_dispatch_into(PD_OP_add, in, 2, NULL, &none, 1), "add: output 0 is NULL");
  pd_tensor *tt = pd_transpose(pd_zeros(2, SHAPE(3, 2), PD_FLOAT32), 2, (int64_t[]){1, 0});
  expect_refused(pd_dispatch_into(PD_OP_add, in, 2, NULL, &tt, 1), "a strided float32");
  expect_refused(pd_dispatch_into(PD_OP_reshape, in, 1, NULL, &ok, 1), "reshape: a view or inplace op");
  expect_refused(pd_dispatch_into(PD_OP_add, in, 1, NULL, &ok, 1), "add: expects 2 inputs, got 1");
  /* and the good one writes */
  assert_int_equal(pd_dispatch_into(PD_OP_add, in, 2, NULL, &ok, 1), PD_OK);
  assert_float_equal(((float *)pd_tensor_data(ok))[5], 2.0f, 0);
  pd_scope_end();
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_sample_matches_dispatch),
      cmocka_unit_test(test_wrong_outputs_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
