/* Traced against eager, generated from the registry: every op sample is
 * recorded under program_guard on static.data Variables of the sample's
 * shapes (and again with dim 0 unknown, -1), with paddle.static.gradients of a random linear functional of
 * its outputs, and run by the Executor three ways (lowered in an arena, lowered without one, interpreted).
 * Outputs and gradients must equal eager's (pd_dispatch + pd_grad on the same values). Inplace ops are
 * covered by their out-of-place twins, as in gradcheck. The test prints per op what it covered and fails on
 * any mismatch or error. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "op_samples.h"
#include "paddlec/static.h"
#include "static/static_internal.h"
#include "test_util.h"

#define TOL 1e-10

static bool close_enough(pd_tensor *got, pd_tensor *want, double tol, char *why, size_t cap) {
  if (!got || !want) {
    snprintf(why, cap, "%s is missing", got ? "the eager value" : "the static value");
    return false;
  }
  if (pd_tensor_dtype(got) != pd_tensor_dtype(want) || pd_tensor_ndim(got) != pd_tensor_ndim(want) ||
      pd_tensor_numel(got) != pd_tensor_numel(want)) {
    snprintf(why, cap, "%s %s vs eager %s %s", pd_dtype_name(pd_tensor_dtype(got)), PD_SHAPE_STR(got),
             pd_dtype_name(pd_tensor_dtype(want)), PD_SHAPE_STR(want));
    return false;
  }
  for (int64_t e = 0; e < pd_tensor_numel(want); e++) {
    double a = pd_tensor_item_at(got, e), b = pd_tensor_item_at(want, e);
    if (isnan(a) && isnan(b)) continue;
    if (!(fabs(a - b) <= tol * (1 + fabs(b)))) {
      snprintf(why, cap, "element %lld: %.17g vs eager %.17g", (long long)e, a, b);
      return false;
    }
  }
  return true;
}

static bool all_zero(pd_tensor *t) {
  for (int64_t e = 0; t && e < pd_tensor_numel(t); e++)
    if (pd_tensor_item_at(t, e) != 0.0) return false;
  return t != NULL;
}

typedef struct traced {
  pd_program *main, *startup;
  pd_tensor *vars[PD_MAX_OUTPUTS];  /* the data Variables */
  pd_tensor *outs[PD_MAX_OUTPUTS];  /* the op's outputs (Variables) */
  pd_tensor *grads[PD_MAX_OUTPUTS]; /* d functional / d input (Variables or NULL) */
  int n_in, n_out;
} traced;

static void traced_free(traced *t) {
  for (int i = 0; i < PD_MAX_OUTPUTS; i++) {
    pd_tensor_release(t->vars[i]);
    pd_tensor_release(t->outs[i]);
    pd_tensor_release(t->grads[i]);
  }
  pd_program_release(t->main);
  pd_program_release(t->startup);
}

/* Which outputs enter the functional: floating, differentiable. */
static bool weighted(const pd_op_def *def, pd_tensor *out, int k) {
  return !(k < 32 && ((def->nondiff_out >> k) & 1u)) && pd_dtype_is_floating(pd_tensor_dtype(out)) &&
         (def->flags & PD_OPF_DIFF);
}

/* unknown_batch: the data Variables get -1 for dim 0 (the Program is built
 * for any batch), and a recording the op refuses is no failure; values of a
 * recorded Program must still equal eager's. */
static int check_sample(pd_op_id id, const pd_op_sample *s, bool unknown_batch, int *n_grads, int *n_lowered,
                        int *n_refused) {
  const pd_op_def *def = pd_op_table[id];
  pd_tensor *in[PD_MAX_OUTPUTS] = {0}, *w[PD_MAX_OUTPUTS] = {0};
  pd_tensor *eout[PD_MAX_OUTPUTS] = {0}, *eg[PD_MAX_OUTPUTS] = {0};
  pd_attrs a;
  memset(&a, 0, sizeof a);
  sample_reseed(3);
  int n_in = s->make(in, &a), bad = 0, n_eout = 0;
  char why[256] = "";
  traced t = {0};
  if (n_in < 0) {
    fprintf(stderr, "  %s: sample failed: %s\n", s->op, pd_last_error());
    return 1;
  }
  /* eager: outputs, and the gradients of sum_k sum(w_k * out_k) */
  pd_tensor *diff[PD_MAX_OUTPUTS];
  int nd = 0, which[PD_MAX_OUTPUTS];
  for (int i = 0; i < n_in; i++)
    if ((def->flags & PD_OPF_DIFF) && pd_tensor_dtype(in[i]) == PD_FLOAT64) {
      pd_tensor_set_stop_gradient(in[i], false);
      which[nd] = i;
      diff[nd++] = in[i];
    }
  pd_seed(5);
  if (pd_dispatch(id, in, n_in, &a, eout, &n_eout) != PD_OK) {
    fprintf(stderr, "  %s: eager failed: %s\n", s->op, pd_last_error());
    bad = 1;
    goto done;
  }
  pd_tensor *targets[PD_MAX_OUTPUTS];
  int nt = 0;
  for (int k = 0; k < n_eout; k++)
    if (weighted(def, eout[k], k)) {
      w[k] = sample_uniform(pd_tensor_ndim(eout[k]), pd_tensor_shape(eout[k]), -1, 1);
      pd_tensor *wc = pd_cast(w[k], pd_tensor_dtype(eout[k]));
      pd_tensor_release(w[k]);
      w[k] = wc;
      targets[nt++] = eout[k];
    }
  if (nd && nt) {
    pd_tensor *wt[PD_MAX_OUTPUTS];
    for (int k = 0, j = 0; k < n_eout; k++)
      if (w[k]) wt[j++] = w[k];
    if (pd_grad(targets, nt, diff, nd, wt, &(pd_grad_opts){.allow_unused = true}, eg) != PD_OK) {
      fprintf(stderr, "  %s: eager backward failed: %s\n", s->op, pd_last_error());
      bad = 1;
      goto done;
    }
  }

  /* static: the same op on data Variables, and its gradients */
  t.main = pd_static_program();
  t.startup = pd_static_program();
  t.n_in = n_in;
  if (pd_static_program_guard_begin(t.main, t.startup) != PD_OK) goto fail;
  for (int i = 0; i < n_in; i++) {
    char nm[16];
    snprintf(nm, sizeof nm, "in%d", i);
    int64_t shape[PD_MAX_DIMS];
    int nd_i = pd_tensor_ndim(in[i]);
    memcpy(shape, pd_tensor_shape(in[i]), sizeof(int64_t) * (size_t)nd_i);
    if (unknown_batch && nd_i > 0) shape[0] = -1;
    t.vars[i] = pd_static_data(nm, nd_i, shape, pd_tensor_dtype(in[i]));
    if (!t.vars[i]) goto fail_guard;
    pd_tensor_set_stop_gradient(t.vars[i], pd_tensor_stop_gradient(in[i]));
  }
  if (pd_dispatch(id, t.vars, n_in, &a, t.outs, &t.n_out) != PD_OK) goto fail_guard;
  if (t.n_out != n_eout) {
    pd_static_program_guard_end();
    snprintf(why, sizeof why, "%d outputs recorded, eager gave %d", t.n_out, n_eout);
    fprintf(stderr, "  %s: %s\n", s->op, why);
    bad = 1;
    goto done;
  }
  if (nd && nt) {
    pd_tensor *st[PD_MAX_OUTPUTS], *sw[PD_MAX_OUTPUTS], *sv[PD_MAX_OUTPUTS];
    /* the weights enter the program as constants (assigned Variables) */
    for (int k = 0, j = 0; k < n_eout; k++)
      if (w[k]) st[j] = t.outs[k], sw[j++] = pd_assign(w[k]);
    for (int j = 0; j < nd; j++) sv[j] = t.vars[which[j]];
    pd_status gs = pd_static_gradients(st, nt, sv, nd, sw, NULL, 0, t.grads);
    for (int j = 0; j < nt; j++) pd_tensor_release(sw[j]);
    if (gs != PD_OK) goto fail_guard;
  }
  if (pd_static_program_guard_end() != PD_OK) goto fail;

  static const char *const how[3] = {"lowered in an arena", "lowered", "interpreted"};
  for (int mode = 0; mode < 3 && !bad; mode++) {
    pd_executor *exe = pd_static_executor(PD_CPU);
    pd_executor_set_arena(exe, mode == 0);
    pd_executor_set_interpret(exe, mode == 2);
    pd_var_scope *scope = pd_static_scope();
    pd_static_feed feed[PD_MAX_OUTPUTS];
    char names[PD_MAX_OUTPUTS][16];
    for (int i = 0; i < n_in; i++) {
      snprintf(names[i], sizeof names[i], "in%d", i);
      feed[i] = (pd_static_feed){names[i], in[i]};
    }
    pd_tensor *fetch[2 * PD_MAX_OUTPUTS], *got[2 * PD_MAX_OUTPUTS] = {0};
    int nf = 0;
    for (int k = 0; k < t.n_out; k++) fetch[nf++] = t.outs[k];
    int first_grad = nf;
    for (int j = 0; j < nd; j++)
      if (t.grads[j]) fetch[nf++] = t.grads[j];
    pd_seed(5);
    pd_status st = pd_executor_run(exe, t.startup, NULL, 0, NULL, 0, NULL, scope);
    if (st == PD_OK) st = pd_executor_run(exe, t.main, feed, n_in, fetch, nf, got, scope);
    if (st != PD_OK) {
      fprintf(stderr, "  %s%s: %s: %s\n", s->op, unknown_batch ? " (batch -1)" : "", how[mode],
              pd_last_error());
      bad = 1;
    }
    /* a program whose backward rule computes on values is interpreted */
    if (mode == 1 && !unknown_batch && pd_executor_lowered_program(exe)) (*n_lowered)++;
    for (int k = 0; k < t.n_out && !bad; k++) {
      /* random ops draw in another order when traced: shapes only */
      bool random = def->flags & PD_OPF_RANDOM;
      if (random ? pd_tensor_numel(got[k]) != pd_tensor_numel(eout[k])
                 : !close_enough(got[k], eout[k], TOL, why, sizeof why)) {
        fprintf(stderr, "  %s%s: %s: output %d: %s\n", s->op, unknown_batch ? " (batch -1)" : "", how[mode],
                k, why);
        bad = 1;
      }
    }
    for (int j = 0, f = first_grad; j < nd && !bad; j++) {
      if (!t.grads[j] && !eg[j]) continue;
      /* an input the rule gives no gradient (expand_as's shape operand):
       * eager has none, the program a zero one */
      if (t.grads[j] && !eg[j] && all_zero(got[f])) {
        f++;
        continue;
      }
      if (!t.grads[j] || !eg[j]) {
        fprintf(stderr, "  %s: input %d: a gradient %s\n", s->op, which[j],
                t.grads[j] ? "the eager backward does not give" : "missing in the program");
        bad = 1;
        break;
      }
      if (!close_enough(got[f], eg[j], TOL, why, sizeof why)) {
        fprintf(stderr, "  %s%s: %s: gradient of input %d: %s\n", s->op, unknown_batch ? " (batch -1)" : "",
                how[mode], which[j], why);
        bad = 1;
      }
      f++;
      if (mode == 0 && !unknown_batch) (*n_grads)++;
    }
    for (int k = 0; k < nf; k++) pd_tensor_release(got[k]);
    pd_var_scope_release(scope);
    pd_executor_release(exe);
  }
  goto done;
fail_guard:
  pd_static_program_guard_end();
fail:
  if (unknown_batch) { /* e.g. an attribute that names the batch size */
    (*n_refused)++;
    goto done;
  }
  fprintf(stderr, "  %s: recording failed: %s\n", s->op, pd_last_error());
  bad = 1;
done:
  traced_free(&t);
  for (int k = 0; k < PD_MAX_OUTPUTS; k++) pd_tensor_release(eout[k]), pd_tensor_release(w[k]);
  for (int j = 0; j < nd; j++) pd_tensor_release(eg[j]);
  for (int i = 0; i < n_in; i++) pd_tensor_release(in[i]);
  pd_clear_error();
  return bad;
}

static void test_every_op_traced_equals_eager(void **state) {
  (void)state;
  int failures = 0, covered = 0, grads = 0, lowered = 0, samples = 0, refused = 0;
  for (int id = 0; id < PD_NUM_OPS; id++) {
    const pd_op_def *def = pd_op_table[id];
    if (def->flags & PD_OPF_INPLACE) continue;
    int found = 0;
    for (size_t tb = 0; pd_sample_tables[tb]; tb++)
      for (const pd_op_sample *s = pd_sample_tables[tb]; s->op; s++)
        if (strcmp(s->op, def->name) == 0) {
          found++;
          samples++;
          failures += check_sample((pd_op_id)id, s, false, &grads, &lowered, &refused);
          failures += check_sample((pd_op_id)id, s, true, &grads, &lowered, &refused);
        }
    covered += found > 0;
  }
  printf(
      "traced vs eager: %d ops covered by %d samples (%d of them lowered, the rest interpreted), %d "
      "gradients compared, %d failing samples; with a -1 batch, %d samples recorded and compared, %d "
      "refused\n",
      covered, samples, lowered, grads, failures, samples - refused, refused);
  assert_true(lowered > samples * 3 / 4);
  assert_int_equal(failures, 0);
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_op_traced_equals_eager),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
