/* Samples for the communication ops, in a group of one (they copy). */
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

const pd_op_sample pd_samples_comm[] = {
    {"c_allreduce", s_allreduce, 0},
    {"c_allgather", s_allgather, 0},
    {"c_reduce_scatter", s_reduce_scatter, 0},
    {NULL, NULL, 0},
};
