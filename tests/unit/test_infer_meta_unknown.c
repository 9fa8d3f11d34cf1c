/* Shape inference with unknown dims, generated from the registry: every
 * op's samples run once eagerly and once on meta tensors (static-graph
 * Variables) whose batch dim is -1, under a tracer that records instead of
 * running. The recorded output metas must equal the eager shapes, with -1
 * exactly where a dim follows the batch: a third run on meta inputs with
 * another known batch size tells which dims do. An inplace row without a
 * sample of its own uses its out-of-place twin's; an op that cannot take a
 * -1 batch is listed below with the reason, and the test fails when an op
 * has neither a sample nor a listed reason. */
#include <stdio.h>
#include <string.h>

#include "op_samples.h"
#include "test_util.h"

/* Ops whose samples run with the batch known only: the reason each one
 * cannot take -1 there. (None today: every op infers with unknown dims.) */
static const struct {
  const char *op, *reason;
} k_known_batch_only[] = {
    {NULL, NULL},
};

static const char *known_batch_reason(const char *op) {
  for (int i = 0; k_known_batch_only[i].op; i++)
    if (strcmp(k_known_batch_only[i].op, op) == 0) return k_known_batch_only[i].reason;
  return NULL;
}

/* Records every op with a meta input, and every creation op (no inputs),
 * as a Program builder does: its outputs are meta tensors of the inferred
 * shapes; the kernel never runs. */
static int record_tracer(void *ctx, pd_op_id id, pd_tensor *const *in, int n_in, const pd_attrs *a,
                         const pd_meta *meta, pd_tensor **out, int n_out, int phase) {
  (void)ctx, (void)id, (void)a;
  bool any = false;
  for (int i = 0; i < n_in; i++) any |= pd_tensor_is_meta(in[i]);
  if (phase != 0 || (!any && n_in > 0)) return 0;
  for (int k = 0; k < n_out; k++) out[k] = pd_tensor_new_meta(meta[k].dtype, meta[k].ndim, meta[k].shape);
  return 1;
}

/* Runs op id on meta tensors of the input metas im[] (taken before the
 * eager run, which may change an inplace op's x), whose dim 0 becomes
 * `batch` where it equals input 0's (the batch). Writes the output metas;
 * returns their count, or -1 with the error set. */
static int infer(pd_op_id id, const pd_meta *im, int n_in, const pd_attrs *a, int64_t batch,
                 pd_meta *out_meta) {
  pd_tensor *m[PD_MAX_OUTPUTS] = {0}, *out[PD_MAX_OUTPUTS] = {0};
  int64_t b0 = n_in > 0 && im[0].ndim > 0 ? im[0].shape[0] : -2;
  for (int i = 0; i < n_in; i++) {
    int64_t shape[PD_MAX_DIMS];
    memcpy(shape, im[i].shape, sizeof shape);
    if (im[i].ndim > 0 && shape[0] == b0) shape[0] = batch;
    m[i] = pd_tensor_new_meta(im[i].dtype, im[i].ndim, shape);
  }
  pd_dispatch_set_tracer(record_tracer, NULL);
  int n_out = 0;
  pd_status st = pd_dispatch(id, m, n_in, a, out, &n_out);
  pd_dispatch_set_tracer(NULL, NULL);
  for (int i = 0; i < n_in; i++) pd_tensor_release(m[i]);
  if (st != PD_OK) return -1;
  for (int k = 0; k < n_out; k++) {
    assert_true(pd_tensor_is_meta(out[k]));
    pd_meta_of(out[k], &out_meta[k]);
    pd_tensor_release(out[k]);
  }
  return n_out;
}

/* How each sample was checked, for the summary. */
static int g_strict, g_loose, g_no_batch;

static void meta_str(const pd_meta *m, char *buf, size_t cap) { pd_shape_str(m->ndim, m->shape, buf, cap); }

/* One sample; returns the number of failures. A twin's sample (`as` is
 * not the op) that the inplace op refuses eagerly is skipped (*used 0). */
static int check_sample(pd_op_id id, const pd_op_sample *s, const char *as, int *used) {
  pd_tensor *in[PD_MAX_OUTPUTS] = {0}, *eager[PD_MAX_OUTPUTS] = {0};
  pd_attrs a;
  memset(&a, 0, sizeof a);
  sample_reseed(7);
  int n_in = s->make(in, &a), n_eager = 0, bad = 0;
  const char *name = pd_op_table[id]->name;
  if (n_in < 0) {
    fprintf(stderr, "  %s (sample of %s): sample failed: %s\n", name, as, pd_last_error());
    pd_clear_error();
    return 1;
  }
  pd_meta im[PD_MAX_OUTPUTS];
  for (int i = 0; i < n_in; i++) pd_meta_of(in[i], &im[i]);
  pd_seed(1);
  *used = 1;
  if (pd_dispatch(id, in, n_in, &a, eager, &n_eager) != PD_OK) {
    if (strcmp(as, name) != 0) { /* add's broadcasting sample does not fit add_ */
      pd_clear_error();
      *used = 0;
      goto done;
    }
    fprintf(stderr, "  %s: the sample does not run eagerly: %s\n", name, pd_last_error());
    pd_clear_error();
    bad = 1;
    goto done;
  }
  pd_meta em[PD_MAX_OUTPUTS], known[PD_MAX_OUTPUTS], unknown[PD_MAX_OUTPUTS], other[PD_MAX_OUTPUTS];
  for (int k = 0; k < n_eager; k++) pd_meta_of(eager[k], &em[k]);
  int64_t b = n_in > 0 && im[0].ndim > 0 ? im[0].shape[0] : -2;
  /* with every dim known, inference alone must give the eager metas
   * (data-dependent dims, as nonzero's count, are -1) */
  int nk = infer(id, im, n_in, &a, b, known);
  if (nk != n_eager) {
    fprintf(stderr, "  %s: inference on known metas gave %d outputs (eager %d): %s\n", name, nk, n_eager,
            nk < 0 ? pd_last_error() : "");
    pd_clear_error();
    bad = 1;
    goto done;
  }
  for (int k = 0; k < n_eager; k++) {
    bool ok = known[k].dtype == em[k].dtype && known[k].ndim == em[k].ndim;
    for (int d = 0; d < em[k].ndim && ok; d++)
      ok = known[k].shape[d] == em[k].shape[d] || known[k].shape[d] == -1;
    if (!ok) {
      char x[160], y[160];
      meta_str(&known[k], x, sizeof x);
      meta_str(&em[k], y, sizeof y);
      fprintf(stderr, "  %s: output %d inferred as %s %s, eager %s %s\n", name, k, x,
              pd_dtype_name(known[k].dtype), y, pd_dtype_name(em[k].dtype));
      bad = 1;
    }
  }
  if (b < 1 || bad) { /* no batch dim to hide (creation ops, a 0-D input) */
    g_no_batch += !bad;
    goto done;
  }
  const char *reason = known_batch_reason(name);
  int nu = infer(id, im, n_in, &a, -1, unknown);
  if (reason) {
    printf("  %s: batch known only (%s)\n", name, reason);
    pd_clear_error();
    goto done;
  }
  if (nu != n_eager) {
    fprintf(stderr, "  %s: inference with a -1 batch failed: %s\n", name, nu < 0 ? pd_last_error() : "");
    pd_clear_error();
    bad = 1;
    goto done;
  }
  /* the same op on other batch sizes (larger, and 1 or smaller) shows
   * which dims follow the batch: those must be -1, the others known. Where
   * no other size fits the sample (a dim tied to the batch by an
   * attribute), a dim may be known or -1. */
  int64_t sizes[2] = {b + 2, b > 1 ? 1 : b + 3};
  bool tried = false, varies[PD_MAX_OUTPUTS][PD_MAX_DIMS] = {{false}};
  for (int t = 0; t < 2; t++) {
    int no = infer(id, im, n_in, &a, sizes[t], other);
    pd_clear_error();
    if (no != n_eager) continue;
    tried = true;
    for (int k = 0; k < n_eager; k++)
      for (int d = 0; d < em[k].ndim; d++)
        varies[k][d] |= other[k].ndim != em[k].ndim || other[k].shape[d] != known[k].shape[d];
  }
  if (tried)
    g_strict++;
  else {
    g_loose++;
    printf("  %s: no other batch size fits its sample: each dim may be known or -1\n", name);
  }
  for (int k = 0; k < n_eager; k++) {
    bool ok = unknown[k].dtype == em[k].dtype && unknown[k].ndim == em[k].ndim;
    for (int d = 0; d < em[k].ndim && ok; d++) {
      int64_t want = known[k].shape[d], got = unknown[k].shape[d];
      ok = !tried ? got == want || got == -1 : varies[k][d] ? got == -1 : got == want;
    }
    if (!ok) {
      char x[160], y[160];
      meta_str(&unknown[k], x, sizeof x);
      meta_str(&known[k], y, sizeof y);
      fprintf(stderr, "  %s: output %d with a -1 batch inferred as %s; batch %lld gives %s%s\n", name, k, x,
              (long long)b, y, tried ? "" : " (no other batch size fits the sample)");
      bad = 1;
    }
  }
done:
  for (int k = 0; k < n_eager; k++) pd_tensor_release(eager[k]);
  for (int i = 0; i < n_in; i++) pd_tensor_release(in[i]);
  return bad;
}

static int check_op_samples(pd_op_id id, const char *sample_name, int *found) {
  int bad = 0;
  for (size_t t = 0; pd_sample_tables[t]; t++)
    for (const pd_op_sample *s = pd_sample_tables[t]; s->op; s++)
      if (strcmp(s->op, sample_name) == 0) {
        int used = 0;
        bad += check_sample(id, s, sample_name, &used);
        *found += used;
      }
  return bad;
}

static void test_every_op_infers_with_an_unknown_batch(void **state) {
  (void)state;
  int failures = 0, missing = 0, covered = 0;
  for (int id = 0; id < PD_NUM_OPS; id++) {
    const pd_op_def *def = pd_op_table[id];
    int found = 0;
    failures += check_op_samples((pd_op_id)id, def->name, &found);
    size_t len = strlen(def->name);
    if (!found && (def->flags & PD_OPF_INPLACE) && len > 1 && len < 64 && def->name[len - 1] == '_') {
      char twin[64];
      memcpy(twin, def->name, len - 1);
      twin[len - 1] = '\0';
      failures += check_op_samples((pd_op_id)id, twin, &found);
    }
    if (found) {
      covered++;
    } else {
      missing++;
      fprintf(stderr, "infer_meta_unknown: %s has no sample\n", def->name);
    }
  }
  printf("infer_meta_unknown: %d ops covered, %d without a sample, %d failing samples\n", covered, missing,
         failures);
  printf("infer_meta_unknown: samples checked against other batch sizes %d, without %d, with no batch %d\n",
         g_strict, g_loose, g_no_batch);
  assert_int_equal(failures, 0);
  assert_int_equal(missing, 0);
  expect_no_live_tensors();
}

/* Hand-written cases: the broadcast rule and the ops Paddle's programs use
 * most, with values worked out by hand. */
static pd_tensor *var(int nd, const int64_t *shape) { return pd_tensor_new_meta(PD_FLOAT32, nd, shape); }

static void test_unknown_dims_by_hand(void **state) {
  (void)state;
  int64_t out[PD_MAX_DIMS];
  int n = 0;
  assert_int_equal(pd_broadcast_shapes("t", 2, SHAPE(-1, 1), 2, SHAPE(1, 4), &n, out), PD_OK);
  assert_int_equal(out[0], -1);
  assert_int_equal(out[1], 4);
  assert_int_equal(pd_broadcast_shapes("t", 2, SHAPE(-1, 3), 1, SHAPE(3), &n, out), PD_OK);
  assert_int_equal(out[0], -1);
  assert_int_equal(pd_broadcast_shapes("t", 1, SHAPE(-1), 1, SHAPE(5), &n, out), PD_OK);
  assert_int_equal(out[0], 5);
  assert_int_equal(pd_broadcast_shapes("t", 1, SHAPE(-1), 1, SHAPE(-1), &n, out), PD_OK);
  assert_int_equal(out[0], -1);
  assert_int_equal(pd_broadcast_shapes("add", 2, SHAPE(-1, 3), 2, SHAPE(-1, 4), &n, out), PD_ERR_SHAPE);
  pd_clear_error();

  pd_dispatch_set_tracer(record_tracer, NULL);
  pd_tensor *x = var(2, SHAPE(-1, 13)), *w = var(2, SHAPE(13, 1));
  pd_tensor *y = pd_matmul(x, w, false, false);
  expect_shape(y, 2, SHAPE(-1, 1));
  pd_tensor *bad = var(2, SHAPE(12, 1));
  expect_error(pd_matmul(x, bad, false, false), "matmul", "13");
  pd_clear_error();
  pd_tensor *r = pd_reshape(x, 3, SHAPE(0, -1, 1));
  expect_shape(r, 3, SHAPE(-1, 13, 1));
  pd_tensor *r2 = pd_reshape(x, 2, SHAPE(-1, 26));
  expect_shape(r2, 2, SHAPE(-1, 26));
  pd_tensor *r3 = pd_reshape(x, 1, SHAPE(-1));
  expect_shape(r3, 1, SHAPE(-1));
  pd_tensor *s = pd_sum(x, SHAPE(0), 1, false);
  expect_shape(s, 1, SHAPE(13));
  pd_tensor *m = pd_mean(x, SHAPE(1), 1, true);
  expect_shape(m, 2, SHAPE(-1, 1));
  pd_tensor *parts[] = {x, x};
  pd_tensor *c0 = pd_concat(parts, 2, 0);
  expect_shape(c0, 2, SHAPE(-1, 13));
  pd_tensor *c1 = pd_concat(parts, 2, 1);
  expect_shape(c1, 2, SHAPE(-1, 26));
  pd_dispatch_set_tracer(NULL, NULL);
  pd_tensor *all[] = {x, w, y, bad, r, r2, r3, s, m, c0, c1};
  for (size_t k = 0; k < sizeof all / sizeof *all; k++) pd_tensor_release(all[k]);
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_unknown_dims_by_hand),
      cmocka_unit_test(test_every_op_infers_with_an_unknown_batch),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
