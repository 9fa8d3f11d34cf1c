/* Gradcheck samples for the linalg ops. */
#include "op_samples.h"

#define S(...) ((const int64_t[]){__VA_ARGS__})

static int pair(pd_tensor **in, int nx, const int64_t *sx, int ny, const int64_t *sy) {
  in[0] = sample_uniform(nx, sx, -1, 1);
  in[1] = sample_uniform(ny, sy, -1, 1);
  return 2;
}

static int s_matmul(pd_tensor **in, pd_attrs *a) {
  (void)a;
  return pair(in, 2, S(3, 4), 2, S(4, 2));
}
static int s_matmul_tx(pd_tensor **in, pd_attrs *a) {
  a->i[0] = 1;
  return pair(in, 2, S(4, 3), 2, S(4, 2));
}
static int s_matmul_ty(pd_tensor **in, pd_attrs *a) {
  a->i[1] = 1;
  return pair(in, 2, S(3, 4), 2, S(2, 4));
}
static int s_matmul_txty(pd_tensor **in, pd_attrs *a) {
  a->i[0] = a->i[1] = 1;
  return pair(in, 3, S(2, 4, 3), 2, S(2, 4));
}
static int s_matmul_bcast(pd_tensor **in, pd_attrs *a) {
  (void)a;
  return pair(in, 4, S(2, 1, 3, 4), 3, S(5, 4, 2));
}
static int s_matmul_bcast_tx(pd_tensor **in, pd_attrs *a) {
  a->i[0] = 1;
  return pair(in, 3, S(2, 4, 3), 4, S(3, 1, 4, 2));
}
static int s_matmul_shared_weight(pd_tensor **in, pd_attrs *a) {
  (void)a;
  return pair(in, 3, S(2, 3, 4), 2, S(4, 5));
}
static int s_matmul_shared_weight_ty(pd_tensor **in, pd_attrs *a) {
  a->i[1] = 1;
  return pair(in, 3, S(2, 3, 4), 2, S(5, 4));
}
static int s_matmul_vv(pd_tensor **in, pd_attrs *a) {
  a->i[0] = 1; /* no effect on vectors */
  return pair(in, 1, S(4), 1, S(4));
}
static int s_matmul_vm(pd_tensor **in, pd_attrs *a) {
  (void)a;
  return pair(in, 1, S(4), 3, S(2, 4, 3));
}
static int s_matmul_mv(pd_tensor **in, pd_attrs *a) {
  a->i[0] = 1;
  return pair(in, 3, S(2, 4, 3), 1, S(4));
}
static int s_mm(pd_tensor **in, pd_attrs *a) {
  (void)a;
  return pair(in, 2, S(3, 4), 2, S(4, 2));
}
static int s_bmm(pd_tensor **in, pd_attrs *a) {
  (void)a;
  return pair(in, 3, S(2, 3, 4), 3, S(2, 4, 2));
}
static int s_mv(pd_tensor **in, pd_attrs *a) {
  (void)a;
  return pair(in, 2, S(3, 4), 1, S(4));
}
static int s_dot_1d(pd_tensor **in, pd_attrs *a) {
  (void)a;
  return pair(in, 1, S(5), 1, S(5));
}
static int s_dot_2d(pd_tensor **in, pd_attrs *a) {
  (void)a;
  return pair(in, 2, S(3, 4), 2, S(3, 4));
}
static int s_addmm(pd_tensor **in, pd_attrs *a) {
  a->f[0] = 1;
  a->f[1] = 1;
  in[0] = sample_uniform(2, S(3, 2), -1, 1);
  in[1] = sample_uniform(2, S(3, 4), -1, 1);
  in[2] = sample_uniform(2, S(4, 2), -1, 1);
  return 3;
}
static int s_addmm_bcast(pd_tensor **in, pd_attrs *a) {
  a->f[0] = 0.5;
  a->f[1] = -2;
  in[0] = sample_uniform(1, S(2), -1, 1);
  in[1] = sample_uniform(2, S(3, 4), -1, 1);
  in[2] = sample_uniform(2, S(4, 2), -1, 1);
  return 3;
}
static int s_t(pd_tensor **in, pd_attrs *a) {
  (void)a;
  in[0] = sample_uniform(2, S(3, 4), -1, 1);
  return 1;
}
static int s_t_1d(pd_tensor **in, pd_attrs *a) {
  (void)a;
  in[0] = sample_uniform(1, S(3), -1, 1);
  return 1;
}

const pd_op_sample pd_samples_linalg[] = {
    {"matmul", s_matmul, 0},
    {"matmul", s_matmul_tx, 0},
    {"matmul", s_matmul_ty, 0},
    {"matmul", s_matmul_txty, 0},
    {"matmul", s_matmul_bcast, 0},
    {"matmul", s_matmul_bcast_tx, 0},
    {"matmul", s_matmul_shared_weight, 0},
    {"matmul", s_matmul_shared_weight_ty, 0},
    {"matmul", s_matmul_vv, 0},
    {"matmul", s_matmul_vm, 0},
    {"matmul", s_matmul_mv, 0},
    {"mm", s_mm, 0},
    {"bmm", s_bmm, 0},
    {"mv", s_mv, 0},
    {"dot", s_dot_1d, 0},
    {"dot", s_dot_2d, 0},
    {"addmm", s_addmm, 0},
    {"addmm", s_addmm_bcast, 0},
    {"t", s_t, 0},
    {"t", s_t_1d, 0},
    {NULL, NULL, 0},
};
