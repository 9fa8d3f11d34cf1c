/* Samples for the communication ops, in a group of one (the collectives
 * copy; softmax cross entropy over one shard of every class). */
#include "op_samples.h"

#define S(...) ((const int64_t[]){__VA_ARGS__})

static int s_allreduce(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(3, 2), -1, 1);
  a->i[1] = 1; /* nranks */
  return 1;
}
static int s_allgather(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(3, 2), -1, 1);
  a->i[1] = 1;
  a->i[2] = 1; /* axis */
  return 1;
}
static int s_reduce_scatter(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(3, 2), -1, 1);
  a->i[1] = 1;
  a->i[3] = 1; /* axis */
  return 1;
}
/* Softmax cross entropy over one class shard holding every class. */
static void ce_attrs(pd_attrs *a, bool soft, int64_t axis, int64_t classes) {
  a->i[0] = soft;
  a->i[2] = -100; /* ignore_index */
  a->i[3] = axis;
  a->i[4] = 1; /* nranks */
  sample_set_list(a, 0, 1, S(classes));
}
static int s_c_softmax_ce(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(4, 5), -2, 2);
  in[1] = sample_indices(2, S(4, 1), 5);
  ce_attrs(a, false, -1, 5);
  return 2;
}
static int s_c_softmax_ce_soft_axis0(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(3, 2), -2, 2);
  in[1] = sample_uniform(2, S(3, 2), 0, 1);
  ce_attrs(a, true, 0, 3);
  return 2;
}
static int s_c_softmax_ce_grad(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(4, 5), -2, 2);
  in[1] = sample_indices(2, S(4, 1), 5);
  in[2] = sample_uniform(2, S(4, 1), 1, 2);
  in[3] = sample_uniform(2, S(4, 1), -1, 1);
  ce_attrs(a, false, 1, 5);
  return 4;
}

static int s_coalesce(pd_tensor **in, pd_attrs *a) {
  (void)a;
  in[0] = sample_uniform(2, S(3, 2), -1, 1);
  in[1] = sample_uniform(1, S(4), -1, 1);
  return 2;
}
static int s_bucket(pd_tensor **in, pd_attrs *a) { /* start or wait: a group of one does nothing */
  in[0] = sample_uniform(1, S(6), -1, 1);
  a->i[1] = 1;
  return 1;
}

const pd_op_sample pd_samples_comm[] = {
    {"c_allreduce", s_allreduce, 0},
    {"c_allgather", s_allgather, 0},
    {"c_reduce_scatter", s_reduce_scatter, 0},
    {"c_softmax_with_cross_entropy", s_c_softmax_ce, 0},
    {"c_softmax_with_cross_entropy", s_c_softmax_ce_soft_axis0, 0},
    {"c_softmax_with_cross_entropy_grad", s_c_softmax_ce_grad, 0},
    {"c_coalesce", s_coalesce, 0},
    {"c_allreduce_start_", s_bucket, 0},
    {"c_allreduce_wait_", s_bucket, 0},
    {NULL, NULL, 0},
};
