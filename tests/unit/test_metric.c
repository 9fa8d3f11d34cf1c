/* paddle.metric: Accuracy, Precision, Recall, Auc against hand-computed values. */
#include <math.h>
#include <stdlib.h>

#include "test_util.h"

static void test_accuracy_topk_ties(void **state) {
  (void)state;
  pd_metric *m = pd_metric_accuracy((const int[]){1, 5}, 2, NULL);
  assert_string_equal(pd_metric_name(m, 0), "acc_top1");
  assert_string_equal(pd_metric_name(m, 1), "acc_top5");
  pd_scope_begin();
  /* row 0: classes 1 and 2 tie at 0.5; the lower index ranks first, so label 2 misses top-1 but is in top-5.
   * row 1: all of 1..5 tie; top-5 is classes 0..4, so label 5 misses both.
   * row 2: a clear hit. */
  pd_tensor *pred = T(PD_FLOAT32, 2, SHAPE(3, 6), 0.1, 0.5, 0.5, 0.2, 0.3, 0.0, 0.9, 0.1, 0.1, 0.1, 0.1, 0.1,
                      1, 0, 0, 0, 0, 0);
  pd_tensor *label = T(PD_INT64, 2, SHAPE(3, 1), 2, 5, 0);
  pd_tensor *correct;
  assert_int_equal(pd_metric_compute(m, (pd_tensor *[]){pred, label}, 2, &correct, 1), 1);
  expect_shape(correct, 2, SHAPE(3, 5));
  EXPECT_VALUES(correct, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0);
  double b[2], v[2];
  assert_int_equal(pd_metric_update(m, &correct, 1, b), PD_OK);
  assert_true(fabs(b[0] - 1.0 / 3) < 1e-12 && fabs(b[1] - 2.0 / 3) < 1e-12);
  /* a second batch with a 1-D label: one top-1 hit */
  pd_tensor *p2 = T(PD_FLOAT32, 2, SHAPE(1, 6), 0, 0, 0, 0.7, 0, 0);
  pd_tensor *l2 = T(PD_INT64, 1, SHAPE(1), 3);
  assert_int_equal(pd_metric_compute(m, (pd_tensor *[]){p2, l2}, 2, &correct, 1), 1);
  assert_int_equal(pd_metric_update(m, &correct, 1, b), PD_OK);
  assert_int_equal(pd_metric_accumulate(m, v), 2);
  assert_true(fabs(v[0] - 2.0 / 4) < 1e-12 && fabs(v[1] - 3.0 / 4) < 1e-12);
  /* one-hot labels */
  pd_tensor *oh = T(PD_FLOAT32, 2, SHAPE(1, 6), 0, 0, 0, 1, 0, 0);
  assert_int_equal(pd_metric_compute(m, (pd_tensor *[]){p2, oh}, 2, &correct, 1), 1);
  EXPECT_VALUES(correct, 0, 1, 0, 0, 0, 0);
  pd_metric_reset(m);
  pd_metric_accumulate(m, v);
  assert_true(v[0] == 0 && v[1] == 0);
  /* topk beyond the classes */
  pd_tensor *p3 = T(PD_FLOAT32, 2, SHAPE(1, 3), 0, 1, 2);
  assert_true(pd_metric_compute(m, (pd_tensor *[]){p3, l2}, 2, &correct, 1) < 0);
  expect_error(NULL, "Accuracy", "3 classes");
  pd_scope_end();
  pd_metric_release(m);
  m = pd_metric_accuracy(NULL, 0, "top1");
  assert_string_equal(pd_metric_name(m, 0), "top1");
  pd_metric_release(m);
  assert_null(pd_metric_accuracy((const int[]){0}, 1, NULL));
  expect_error(NULL, "Accuracy", "topk[0] = 0");
  expect_no_live_tensors();
}

static void test_precision_recall(void **state) {
  (void)state;
  pd_metric *p = pd_metric_precision(NULL), *r = pd_metric_recall(NULL);
  assert_string_equal(pd_metric_name(p, 0), "precision");
  assert_string_equal(pd_metric_name(r, 0), "recall");
  pd_scope_begin();
  /* predicted 1: 0.9, 0.6, 0.5, 0.7 (floor(p + 0.5) == 1) at 0, 1, 4, 5; labels 1 at 0, 2, 5.
   * precision: tp {0, 5}, fp {1, 4} -> 0.5; recall: tp {0, 5}, fn {2} -> 2/3 */
  pd_tensor *pred = T(PD_FLOAT32, 2, SHAPE(6, 1), 0.9, 0.6, 0.4, 0.2, 0.5, 0.7);
  pd_tensor *lab = T(PD_INT64, 2, SHAPE(6, 1), 1, 0, 1, 0, 0, 1);
  pd_tensor *args[2] = {pred, lab};
  double b, v;
  assert_int_equal(pd_metric_update(p, args, 2, &b), PD_OK);
  assert_true(fabs(b - 0.5) < 1e-12);
  assert_int_equal(pd_metric_update(r, args, 2, &b), PD_OK);
  assert_true(fabs(b - 2.0 / 3) < 1e-12);
  /* identity compute */
  pd_tensor *out[2];
  assert_int_equal(pd_metric_compute(p, args, 2, out, 2), 2);
  assert_ptr_equal(out[0], pred);
  /* a second batch: one more true positive */
  pd_tensor *p2 = T(PD_FLOAT64, 1, SHAPE(1), 0.8), *l2 = T(PD_FLOAT64, 1, SHAPE(1), 1);
  pd_tensor *a2[2] = {p2, l2};
  pd_metric_update(p, a2, 2, NULL);
  pd_metric_update(r, a2, 2, NULL);
  pd_metric_accumulate(p, &v);
  assert_true(fabs(v - 3.0 / 5) < 1e-12);
  pd_metric_accumulate(r, &v);
  assert_true(fabs(v - 3.0 / 4) < 1e-12);
  pd_metric_reset(p);
  pd_metric_accumulate(p, &v);
  assert_true(v == 0.0);
  pd_tensor *short_lab = T(PD_INT64, 1, SHAPE(2), 1, 0);
  assert_true(pd_metric_update(p, (pd_tensor *[]){pred, short_lab}, 2, NULL) < 0);
  expect_error(NULL, "Precision", "6 elements");
  pd_scope_end();
  pd_metric_release(p);
  pd_metric_release(r);
  expect_no_live_tensors();
}

/* ROC area by the trapezoid rule over the distinct scores, from the top. */
static double trapezoid_auc(const double *score, const int *label, int n) {
  int pos = 0, neg = 0;
  for (int i = 0; i < n; i++) label[i] ? pos++ : neg++;
  double area = 0, tpr_prev = 0, fpr_prev = 0;
  int *used = calloc((size_t)n, sizeof(int));
  int tp = 0, fp = 0;
  for (;;) {
    double best = -1;
    for (int i = 0; i < n; i++)
      if (!used[i] && score[i] > best) best = score[i];
    if (best < 0) break;
    for (int i = 0; i < n; i++)
      if (!used[i] && score[i] == best) {
        used[i] = 1;
        label[i] ? tp++ : fp++;
      }
    double tpr = (double)tp / pos, fpr = (double)fp / neg;
    area += (fpr - fpr_prev) * (tpr + tpr_prev) / 2;
    tpr_prev = tpr;
    fpr_prev = fpr;
  }
  free(used);
  return area;
}

static void test_auc(void **state) {
  (void)state;
  pd_metric *m = pd_metric_auc(NULL, 0, NULL);
  assert_string_equal(pd_metric_name(m, 0), "auc");
  const double s[8] = {0.9, 0.8, 0.7, 0.6, 0.55, 0.4, 0.3, 0.1};
  const int l[8] = {1, 1, 0, 1, 0, 1, 0, 0};
  double pr[16];
  double lab[8];
  for (int i = 0; i < 8; i++) pr[2 * i] = 1 - s[i], pr[2 * i + 1] = s[i], lab[i] = l[i];
  pd_scope_begin();
  pd_tensor *pred = pd_tensor_from_f64(pr, PD_FLOAT32, 2, SHAPE(8, 2));
  pd_tensor *label = pd_tensor_from_f64(lab, PD_INT64, 2, SHAPE(8, 1));
  double b, v;
  assert_int_equal(pd_metric_update(m, (pd_tensor *[]){pred, label}, 2, &b), PD_OK);
  pd_metric_accumulate(m, &v);
  double want = trapezoid_auc(s, l, 8); /* 13 of 16 (positive, negative) pairs ordered */
  assert_true(fabs(want - 13.0 / 16) < 1e-12);
  assert_true(fabs(v - want) < 1e-9);
  /* a coarse metric puts ties in one bucket: 2 thresholds -> buckets {0, 1, 2} */
  pd_metric *c = pd_metric_auc("ROC", 2, "auc2");
  pd_metric_update(c, (pd_tensor *[]){pred, label}, 2, NULL);
  pd_metric_accumulate(c, &v);
  double sb[8];
  for (int i = 0; i < 8; i++) sb[i] = floor(s[i] * 2);
  assert_true(fabs(v - trapezoid_auc(sb, l, 8)) < 1e-12);
  pd_metric_release(c);
  pd_tensor *bad = T(PD_FLOAT32, 2, SHAPE(1, 2), 0.0, 1.5);
  assert_true(pd_metric_update(m, (pd_tensor *[]){bad, label}, 2, NULL) < 0);
  expect_error(NULL, "Auc", "8 labels");
  pd_tensor *l1 = T(PD_INT64, 1, SHAPE(1), 1);
  assert_true(pd_metric_update(m, (pd_tensor *[]){bad, l1}, 2, NULL) < 0);
  expect_error(NULL, "Auc", "1.5");
  pd_scope_end();
  pd_metric_release(m);
  assert_null(pd_metric_auc("PR", 0, NULL));
  expect_error(NULL, "Auc", "PR");
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_accuracy_topk_ties),
      cmocka_unit_test(test_precision_recall),
      cmocka_unit_test(test_auc),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
