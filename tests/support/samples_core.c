/* Gradcheck samples for the core ops (cast, arithmetic, scale, sum, views). */
#include "op_samples.h"
#include "ops/core/py_func.h"

#define S(...) ((const int64_t[]){__VA_ARGS__})

static int s_cast(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(2, 3), -1, 1);
  a->dtype = PD_FLOAT64;
  return 1;
}
static int s_binary_bcast(pd_tensor **in, pd_attrs *a) {
  (void)a;
  in[0] = sample_uniform(2, S(2, 3), 0.5, 2);
  in[1] = sample_uniform(1, S(3), 0.5, 2);
  return 2;
}
static int s_binary_bcast_left(pd_tensor **in, pd_attrs *a) {
  (void)a;
  in[0] = sample_uniform(2, S(3, 1), 0.5, 2);
  in[1] = sample_uniform(3, S(2, 1, 4), 0.5, 2);
  return 2;
}
static int s_scale(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(2, 3), -1, 1);
  a->f[0] = -1.5;
  a->f[1] = 0.25;
  return 1;
}
static int s_sum_axis(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(3, S(2, 3, 4), -1, 1);
  sample_set_list(a, 0, 2, S(0, -1));
  a->i[0] = 1;
  return 1;
}
static int s_sum_all(pd_tensor **in, pd_attrs *a) {
  (void)a;
  in[0] = sample_uniform(2, S(2, 3), -1, 1);
  return 1;
}
static int s_reshape(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(2, 6), -1, 1);
  sample_set_list(a, 0, 3, S(3, -1, 2));
  return 1;
}
static int s_expand(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(3, 1), -1, 1);
  sample_set_list(a, 0, 3, S(2, -1, 4));
  return 1;
}
static int s_transpose(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(3, S(2, 3, 4), -1, 1);
  sample_set_list(a, 0, 3, S(2, 0, 1));
  return 1;
}

static int s_fill_(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(3, 2), -1, 1);
  a->f[0] = 2.5;
  return 1;
}

/* py_func over a C cube: y = x^3, dy/dx = 3 x^2. */
static pd_status cube(void *user, pd_tensor *const *in, int n_in, pd_tensor **out, int n_out) {
  (void)user, (void)n_in, (void)n_out;
  pd_tensor *sq = pd_multiply(in[0], in[0]);
  out[0] = pd_multiply(sq, in[0]);
  pd_tensor_release(sq);
  return out[0] ? PD_OK : pd_last_status();
}
static pd_status cube_grad(void *user, pd_tensor *const *in, int n_in, pd_tensor **out, int n_out) {
  (void)user, (void)n_in, (void)n_out; /* in: x, y, dy */
  pd_tensor *sq = pd_multiply(in[0], in[0]), *t = pd_scale(sq, 3.0, 0.0, true);
  out[0] = pd_multiply(t, in[2]);
  pd_tensor_release(sq);
  pd_tensor_release(t);
  return out[0] ? PD_OK : pd_last_status();
}
static int s_py_func(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(2, 3), -1, 1);
  pd_input_spec spec = {.ndim = 2, .shape = {-1, 3}, .dtype = in[0]->dtype};
  a->i[0] = pd_py_func_register(cube, NULL, cube_grad, &spec, 1);
  return 1;
}

static int s_numel(pd_tensor **in, pd_attrs *a) {
  (void)a;
  in[0] = sample_uniform(3, S(2, 3, 4), -1, 1);
  return 1;
}

const pd_op_sample pd_samples_core[] = {
    {"numel", s_numel, 0},
    {"py_func", s_py_func, 0},
    {"transpose", s_transpose, 0},
    {"cast", s_cast, 0},
    {"add", s_binary_bcast, 0},
    {"add", s_binary_bcast_left, 0},
    {"subtract", s_binary_bcast, 0},
    {"multiply", s_binary_bcast, 0},
    {"multiply", s_binary_bcast_left, 0},
    {"divide", s_binary_bcast, 0},
    {"scale", s_scale, 0},
    {"scale_", s_scale, 0},
    {"add_", s_binary_bcast, 0},
    {"sum", s_sum_axis, 0},
    {"sum", s_sum_all, 0},
    {"reshape", s_reshape, 0},
    {"expand", s_expand, 0},
    {"fill_", s_fill_, 0},
    {NULL, NULL, 0},
};
