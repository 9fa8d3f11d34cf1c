/* Gradcheck samples for the reduction ops (inputs away from ties and kinks:
 * random values make max/min/topk/sort ties improbable). */
#include <math.h>

#include "op_samples.h"

#define S(...) ((const int64_t[]){__VA_ARGS__})
#define VALS(...) ((const double[]){__VA_ARGS__})

static int s_axes_keep(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(3, S(2, 3, 4), -1, 1);
  sample_set_list(a, 0, 2, S(1, -1));
  a->i[0] = 1;
  return 1;
}
static int s_all(pd_tensor **in, pd_attrs *a) {
  (void)a;
  in[0] = sample_uniform(2, S(3, 4), -1, 1);
  return 1;
}
static int s_axis0(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(3, 4), -1, 1);
  sample_set_list(a, 0, 1, S(0));
  return 1;
}
static int s_positive_axis1(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(3, 4), 0.5, 2);
  sample_set_list(a, 0, 1, S(1));
  return 1;
}
/* prod with zeros: one zero in row 0, two in row 1, none in row 2 */
static int s_prod_zeros(pd_tensor **in, pd_attrs *a) {
  in[0] =
      pd_tensor_from_f64(VALS(1.5, 0, -2, 0.5, 0, 3, 0, 1.25, 0.75, -1.5, 2, 1.1), PD_FLOAT64, 2, S(3, 4));
  sample_set_list(a, 0, 1, S(-1));
  return 1;
}
static int s_prod_zeros_t(pd_tensor **in, pd_attrs *a) {
  in[0] =
      pd_tensor_from_f64(VALS(1.5, 0, -2, 0.5, 0, 3, 0, 1.25, 0.75, -1.5, 2, 1.1), PD_FLOAT64, 2, S(4, 3));
  sample_set_list(a, 0, 1, S(0));
  a->i[0] = 1;
  return 1;
}
static int s_var_axis0(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(3, 4), -1, 1);
  sample_set_list(a, 0, 1, S(0));
  a->i[1] = 1; /* unbiased */
  return 1;
}
static int s_var_all_biased(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(2, 3), -1, 1);
  a->i[0] = 1;
  return 1;
}
static void norm_attrs(pd_attrs *a, double p, int naxis, const int64_t *axes) {
  a->f[0] = p;
  if (naxis) sample_set_list(a, 0, naxis, axes);
}
/* values with |x| in [0.3, 1.5] and mixed signs (away from 0 for the sign) */
static pd_tensor *signed_away_from_zero(int nd, const int64_t *shape) {
  pd_tensor *m = sample_uniform(nd, shape, 0.3, 1.5);
  double *pm = pd_tensor_data(m), ps[64];
  int64_t n = pd_tensor_numel(m);
  if (n > 64) return m;
  /* the signs drawn as numbers, not a tensor: a released temporary would be
   * released again by a scope the caller has open */
  sample_draw(ps, n, -1, 1);
  for (int64_t i = 0; i < n; i++)
    if (ps[i] < 0) pm[i] = -pm[i];
  return m;
}
static int s_norm2(pd_tensor **in, pd_attrs *a) {
  in[0] = signed_away_from_zero(2, S(3, 4));
  norm_attrs(a, 2, 1, S(1));
  return 1;
}
static int s_norm2_all(pd_tensor **in, pd_attrs *a) {
  in[0] = signed_away_from_zero(3, S(2, 2, 3));
  norm_attrs(a, 2, 0, NULL);
  return 1;
}
static int s_norm1(pd_tensor **in, pd_attrs *a) {
  in[0] = signed_away_from_zero(2, S(3, 4));
  norm_attrs(a, 1, 1, S(0));
  a->i[0] = 1;
  return 1;
}
static int s_norm3(pd_tensor **in, pd_attrs *a) {
  in[0] = signed_away_from_zero(3, S(2, 3, 2));
  norm_attrs(a, 3, 2, S(0, 2));
  return 1;
}
static int s_norm_half(pd_tensor **in, pd_attrs *a) {
  in[0] = signed_away_from_zero(2, S(2, 3));
  norm_attrs(a, 0.5, 1, S(-1));
  return 1;
}
static int s_norm_inf(pd_tensor **in, pd_attrs *a) {
  in[0] = signed_away_from_zero(2, S(3, 4));
  norm_attrs(a, INFINITY, 1, S(1));
  return 1;
}
static int s_norm_ninf(pd_tensor **in, pd_attrs *a) {
  in[0] = signed_away_from_zero(2, S(3, 4));
  norm_attrs(a, -INFINITY, 0, NULL);
  return 1;
}
static int s_norm0(pd_tensor **in, pd_attrs *a) {
  in[0] = signed_away_from_zero(2, S(3, 4));
  norm_attrs(a, 0, 1, S(0));
  return 1;
}
static int s_cumsum_axis(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(3, S(2, 3, 4), -1, 1);
  a->i[0] = 1;
  return 1;
}
static int s_cumsum_last(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(3, 4), -1, 1);
  a->i[0] = -1;
  return 1;
}
static int s_cumsum_flat(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(3, 2), -1, 1);
  a->i[1] = 1;
  return 1;
}
static int s_cumsum_excl_rev(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(4, 3), -1, 1);
  a->i[0] = 0;
  a->i[2] = 1;
  a->i[3] = 1;
  return 1;
}
static int s_topk(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(3, 5), -1, 1);
  a->i[0] = 2;
  a->i[1] = -1;
  a->i[2] = 1;
  a->i[3] = 1;
  return 1;
}
static int s_topk_smallest_axis0(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(3, S(4, 2, 3), -1, 1);
  a->i[0] = 3;
  a->i[1] = 0;
  a->i[2] = 0;
  return 1;
}
static int s_argsort(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(3, 4), -1, 1);
  a->i[0] = -1;
  a->i[1] = 1; /* descending */
  return 1;
}
static int s_argsort_axis0(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(3, S(3, 2, 2), -1, 1);
  a->i[0] = 0;
  return 1;
}
static int s_exp_shifted(pd_tensor **in, pd_attrs *a) {
  (void)a;
  in[0] = sample_uniform(2, S(2, 3), -1, 1);
  in[1] = sample_uniform(2, S(2, 1), -1, 1);
  return 2;
}
static int s_abs_pow(pd_tensor **in, pd_attrs *a) {
  in[0] = signed_away_from_zero(2, S(2, 3));
  a->f[0] = 2.5;
  return 1;
}
static int s_abs_pow_neg(pd_tensor **in, pd_attrs *a) {
  in[0] = signed_away_from_zero(2, S(2, 3));
  a->f[0] = -1.5;
  return 1;
}
static int s_take_along(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(3, 4), -1, 1);
  in[1] = sample_indices(2, S(3, 2), 4);
  a->i[0] = 1;
  return 2;
}
static int s_scatter_along(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(2, 3), -1, 1);
  in[1] = sample_indices(2, S(2, 3), 4);
  a->i[0] = 0;
  sample_set_list(a, 0, 2, S(4, 3));
  return 2;
}

/* The reductions without gradients. */
static int s_arg_axis1(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(2, 3), -1, 1);
  a->i[1] = 1;
  return 1;
}
static int s_bool_axis1(pd_tensor **in, pd_attrs *a) {
  in[0] = pd_tensor_from_f64((const double[]){1, 0, 1, 1, 1, 1}, PD_BOOL, 2, S(2, 3));
  sample_set_list(a, 0, 1, S(1));
  return 1;
}

const pd_op_sample pd_samples_reduction[] = {
    {"mean", s_axes_keep, 0},
    {"mean", s_all, 0},
    {"max", s_axis0, 0},
    {"max", s_axes_keep, 0},
    {"min", s_all, 0},
    {"min", s_axes_keep, 0},
    {"prod", s_positive_axis1, 0},
    {"prod", s_axes_keep, 0},
    {"prod", s_prod_zeros, 0},
    {"prod", s_prod_zeros_t, 0},
    {"logsumexp", s_axes_keep, 0},
    {"logsumexp", s_all, 0},
    {"var", s_var_axis0, 0},
    {"var", s_var_all_biased, 0},
    {"std", s_var_axis0, 0},
    {"std", s_var_all_biased, 0},
    {"norm", s_norm2, 0},
    {"norm", s_norm2_all, 0},
    {"norm", s_norm1, 0},
    {"norm", s_norm3, 0},
    {"norm", s_norm_half, 0},
    {"norm", s_norm_inf, 0},
    {"norm", s_norm_ninf, 0},
    {"norm", s_norm0, 0},
    {"cumsum", s_cumsum_axis, 0},
    {"cumsum", s_cumsum_last, 0},
    {"cumsum", s_cumsum_flat, 0},
    {"cumsum", s_cumsum_excl_rev, 0},
    {"topk", s_topk, 0},
    {"topk", s_topk_smallest_axis0, 0},
    {"argsort", s_argsort, 0},
    {"argsort", s_argsort_axis0, 0},
    {"exp_shifted", s_exp_shifted, 0},
    {"abs_pow", s_abs_pow, 0},
    {"abs_pow", s_abs_pow_neg, 0},
    {"prod_exclusive", s_positive_axis1, 0},
    {"prod_exclusive", s_prod_zeros, 0},
    {"prod_exclusive", s_prod_zeros_t, 0},
    {"take_along", s_take_along, 0},
    {"scatter_along", s_scatter_along, 0},
    {"argmax", s_arg_axis1, 0},
    {"argmin", s_arg_axis1, 0},
    {"all", s_bool_axis1, 0},
    {"any", s_bool_axis1, 0},
    {NULL, NULL, 0},
};
