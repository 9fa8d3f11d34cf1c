/* Gradcheck generated from the registry: every differentiable op is run on
 * its samples in float64 and its backward compared with central finite
 * differences of a random linear functional of its outputs. The test prints
 * the ops it covered and fails when a differentiable op has no sample.
 * In-place ops (PD_OPF_INPLACE) are checked through their out-of-place twin
 * plus the dedicated inplace tests. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "op_samples.h"
#include "test_util.h"

#define EPS 1e-6

/* L = sum_k sum(w_k * out_k) over differentiable float outputs. */
static pd_tensor *functional(pd_op_id id, pd_tensor **in, int n_in, const pd_attrs *a, pd_tensor **w, int *nw,
                             bool make_w) {
  pd_tensor *out[PD_MAX_OUTPUTS];
  int n_out = 0;
  if (pd_dispatch(id, in, n_in, a, out, &n_out) != PD_OK) return NULL;
  pd_tensor *total = NULL;
  const pd_op_def *def = pd_op_table[id];
  for (int k = 0; k < n_out; k++) {
    if ((k < 32 && ((def->nondiff_out >> k) & 1u)) || !pd_dtype_is_floating(pd_tensor_dtype(out[k])))
      continue;
    if (make_w) w[k] = sample_uniform(pd_tensor_ndim(out[k]), pd_tensor_shape(out[k]), -1, 1);
    pd_tensor *o64 = pd_cast(out[k], PD_FLOAT64);
    pd_tensor *p = pd_multiply(o64, w[k]);
    pd_tensor *s = pd_sum(p, NULL, 0, false);
    pd_tensor_release(o64);
    pd_tensor_release(p);
    if (total) {
      pd_tensor *t2 = pd_add(total, s);
      pd_tensor_release(total);
      pd_tensor_release(s);
      total = t2;
    } else {
      total = s;
    }
  }
  for (int k = 0; k < n_out; k++) pd_tensor_release(out[k]);
  *nw = n_out;
  return total;
}

static int check_sample(pd_op_id id, const pd_op_sample *s) {
  pd_tensor *in[PD_MAX_OUTPUTS] = {0}, *w[PD_MAX_OUTPUTS] = {0};
  pd_attrs a;
  memset(&a, 0, sizeof a);
  int n_in = s->make(in, &a), nw = 0, bad = 0;
  double tol = s->tol > 0 ? s->tol : 1e-6;
  if (n_in < 0) {
    fprintf(stderr, "  %s: sample failed: %s\n", s->op, pd_last_error());
    return 1;
  }
  pd_tensor *diff_in[PD_MAX_OUTPUTS];
  int idx[PD_MAX_OUTPUTS], nd = 0;
  for (int i = 0; i < n_in; i++) {
    if (pd_tensor_dtype(in[i]) == PD_FLOAT64) {
      pd_tensor_set_stop_gradient(in[i], false);
      diff_in[nd] = in[i];
      idx[nd++] = i;
    }
  }
  pd_tensor *L = functional(id, in, n_in, &a, w, &nw, true);
  pd_tensor *g[PD_MAX_OUTPUTS] = {0};
  if (!L || pd_grad(&L, 1, diff_in, nd, NULL, &(pd_grad_opts){.allow_unused = true}, g) != PD_OK) {
    fprintf(stderr, "  %s: forward/backward failed: %s\n", s->op, pd_last_error());
    bad = 1;
    goto done;
  }
  bool prev = pd_set_grad_enabled(false);
  for (int j = 0; j < nd && !bad; j++) {
    pd_tensor *x = diff_in[j];
    double *p = pd_tensor_data(x);
    for (int64_t e = 0; e < pd_tensor_numel(x); e++) {
      double orig = p[e];
      int dummy;
      p[e] = orig + EPS;
      pd_tensor *lp = functional(id, in, n_in, &a, w, &dummy, false);
      p[e] = orig - EPS;
      pd_tensor *lm = functional(id, in, n_in, &a, w, &dummy, false);
      p[e] = orig;
      double num = (pd_tensor_item(lp) - pd_tensor_item(lm)) / (2 * EPS);
      double ana = g[j] ? pd_tensor_item_at(g[j], e) : 0.0;
      pd_tensor_release(lp);
      pd_tensor_release(lm);
      if (!(fabs(num - ana) <= tol * (1 + fabs(num)))) {
        fprintf(stderr, "  %s: input %d element %lld: analytic %.10g, numeric %.10g\n", s->op, idx[j],
                (long long)e, ana, num);
        bad = 1;
        break;
      }
    }
  }
  pd_set_grad_enabled(prev);
done:
  pd_tensor_release(L);
  for (int j = 0; j < nd; j++) pd_tensor_release(g[j]);
  for (int i = 0; i < n_in; i++) pd_tensor_release(in[i]);
  for (int k = 0; k < nw; k++) pd_tensor_release(w[k]);
  pd_clear_error();
  return bad;
}

static void test_gradcheck_all_differentiable_ops(void **state) {
  (void)state;
  int failures = 0, covered = 0, missing = 0;
  for (int id = 0; id < PD_NUM_OPS; id++) {
    const pd_op_def *def = pd_op_table[id];
    if (!(def->flags & PD_OPF_DIFF) || (def->flags & PD_OPF_INPLACE)) continue;
    int found = 0;
    for (size_t t = 0; pd_sample_tables[t]; t++)
      for (const pd_op_sample *s = pd_sample_tables[t]; s->op; s++)
        if (strcmp(s->op, def->name) == 0) {
          found++;
          failures += check_sample((pd_op_id)id, s);
        }
    if (found) {
      covered++;
      printf("gradcheck: %-20s %d sample(s)\n", def->name, found);
    } else {
      missing++;
      fprintf(stderr, "gradcheck: %s is differentiable but has no sample\n", def->name);
    }
  }
  printf("gradcheck: %d differentiable ops covered, %d missing, %d failing samples\n", covered, missing,
         failures);
  assert_int_equal(missing, 0);
  assert_int_equal(failures, 0);
  expect_no_live_tensors();
}

/* Every op with inputs refuses a NULL input with a message naming it. */
static void test_every_op_rejects_null(void **state) {
  (void)state;
  for (int id = 0; id < PD_NUM_OPS; id++) {
    const pd_op_def *def = pd_op_table[id];
    if (def->n_in == 0) continue;
    pd_tensor *in[4] = {NULL, NULL, NULL, NULL};
    pd_tensor *out[PD_MAX_OUTPUTS];
    int n = 0;
    pd_clear_error();
    assert_true(pd_dispatch((pd_op_id)id, in, def->n_in > 0 ? def->n_in : 1, NULL, out, &n) < 0);
    assert_int_equal(n, 0);
    if (!strstr(pd_last_error(), def->name))
      fail_msg("%s: error '%s' does not name the op", def->name, pd_last_error());
  }
  pd_clear_error();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gradcheck_all_differentiable_ops),
      cmocka_unit_test(test_every_op_rejects_null),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
