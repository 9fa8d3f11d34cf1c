/* auto_parallel in eager mode, on 2 processes (spawned), each figure beside
 * its reference measured in the same run:
 *   1. reshard of a 16 MiB float32 tensor ([2048, 2048]) for each
 *      transition against the raw collective that transition needs, on the
 *      same tensors: ratio = raw time / reshard time (target >= 0.9);
 *      Partial -> Replicate keeps its input, so its reference is the
 *      out-of-place all_reduce (the in-place one is printed aside);
 *   2. per-op overhead of an op on DTensors over the same op on the local
 *      shards (target <= 2 us);
 *   3. seed 000's DemoNet scaled to hidden 1024 (Linear 1024x1024 with
 *      weight Shard(1), ReLU, Linear 1024x1024 with weight Shard(0),
 *      MSELoss, SGD; batch 256) on 2 processes against 1 process (the
 *      dense model trained by each rank on its own first, both at once, so
 *      each has one core as in the sharded run; one thread per process).
 *
 *   build/bench/bench_auto_parallel        (all three)
 *   build/bench/bench_auto_parallel 1|2|3  (one part)
 * Times are per call: the mean of enough calls to last 0.1 s (ops: 0.05 s),
 * the slower rank's (all_reduce MAX outside the timing), the best of 5
 * rounds that alternate with the reference's rounds. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paddlec.h"
#include "paddlec/auto_parallel.h"
#include "paddlec/distributed.h"
#include "distributed/comm/group_internal.h" /* the out-of-place all_reduce Partial -> Replicate runs */
#include "timing.h"

enum { N = 2048, DEMO_BATCH = 256, DEMO_HIDDEN = 1024, DEMO_STEPS = 5, ROUNDS = 5 };

static int g_rank;

typedef void (*bench_fn)(void *ctx);

/* The slower rank's value. */
static double world_max(double v) {
  pd_tensor *m = pd_to_tensor(&v, PD_FLOAT64, 1, (const int64_t[]){1});
  pd_dist_all_reduce(m, PD_REDUCE_MAX, NULL);
  v = pd_tensor_item(m);
  pd_tensor_release(m);
  return v;
}

/* Seconds per call of fn in one round: the mean of enough calls to last
 * min_s, the slower rank's. */
static double time_round(bench_fn fn, void *ctx, double min_s) {
  int reps = 1;
  for (;;) {
    pd_dist_barrier(NULL);
    double t0 = bench_now_s();
    for (int i = 0; i < reps; i++) fn(ctx);
    double dt = world_max(bench_now_s() - t0);
    if (dt > min_s || reps >= 1 << 22) return dt / reps;
    reps *= dt < min_s / 20 ? 16 : 2;
  }
}

/* fn_a and fn_b (fn_b may be NULL) timed in alternating rounds, so a
 * machine busy with other work slows both alike; the best round of each. */
static void time_pair(bench_fn fn_a, void *a, bench_fn fn_b, void *b, double min_s, double *ta, double *tb) {
  fn_a(a);
  if (fn_b) fn_b(b);
  *ta = *tb = 1e30;
  for (int round = 0; round < ROUNDS; round++) {
    double x = time_round(fn_a, a, min_s);
    if (x < *ta) *ta = x;
    if (!fn_b) continue;
    x = time_round(fn_b, b, min_s);
    if (x < *tb) *tb = x;
  }
}

/* ---- 1. reshard against the raw collective ----------------------------------- */
typedef struct reshard_case {
  pd_tensor *x; /* the DTensor resharded */
  pd_dist_process_mesh *mesh;
  pd_dist_placement to[2];
  int n_to;
} reshard_case;

static void run_reshard(void *ctx) {
  reshard_case *c = ctx;
  pd_tensor_release(pd_dist_reshard(c->x, c->mesh, c->to, c->n_to));
}

typedef struct raw_case {
  /* 0 all_gather_into_tensor, 1 all_reduce into another tensor, 2 reduce_scatter, 3 alltoall,
   * 4 send 0 -> 1, 5 all_reduce in place */
  int kind;
  pd_tensor *in, *out;
  pd_tensor *list_in[2], *list_out[2];
} raw_case;

static void run_raw(void *ctx) {
  raw_case *c = ctx;
  switch (c->kind) {
    case 0:
      pd_dist_all_gather_into_tensor(c->out, c->in, NULL);
      break;
    case 1:
      pd_dist_all_reduce_into(c->out, c->in, PD_REDUCE_SUM, NULL);
      break;
    case 2:
      pd_dist_reduce_scatter(c->out, c->list_in, PD_REDUCE_SUM, NULL);
      break;
    case 3:
      pd_dist_alltoall(c->list_out, c->list_in, NULL);
      break;
    case 5:
      pd_dist_all_reduce(c->in, PD_REDUCE_SUM, NULL);
      break;
    case 4:
      if (g_rank == 0)
        pd_dist_send(c->in, 1, NULL);
      else
        pd_dist_recv(c->in, 0, NULL);
      break;
  }
}

static pd_tensor *filled(int ndim, const int64_t *shape, double v) {
  return pd_full(ndim, shape, v, PD_FLOAT32);
}

static void bench_reshard(void) {
  pd_dist_process_mesh *mesh = pd_dist_process_mesh_new(1, (const int64_t[]){2}, (const int[]){0, 1}, NULL);
  pd_dist_process_mesh *m0 = pd_dist_process_mesh_new(1, (const int64_t[]){1}, (const int[]){0}, NULL);
  pd_dist_process_mesh *m1 = pd_dist_process_mesh_new(1, (const int64_t[]){1}, (const int[]){1}, NULL);
  /* [pp, mp] = [2, 1]: its row 0 is a sub-mesh (a pipeline stage) */
  pd_dist_process_mesh *g2 = pd_dist_process_mesh_new(2, (const int64_t[]){2, 1}, (const int[]){0, 1},
                                                      (const char *const[]){"pp", "mp"});
  pd_dist_process_mesh *stage0 = pd_dist_process_mesh_get_mesh_with_dim(g2, "pp", 0);
  pd_dist_placement R = pd_dist_replicate(), S0 = pd_dist_shard(0), S1 = pd_dist_shard(1),
                    P = pd_dist_partial(PD_REDUCE_SUM);
  const int64_t half0[] = {N / 2, N}, half1[] = {N, N / 2}, whole[] = {N, N}, block[] = {N / 2, N / 2};
  pd_tensor *l_half0 = filled(2, half0, 1), *l_half1 = filled(2, half1, 1), *l_whole = filled(2, whole, 1);
  pd_tensor *x_s0 = pd_dist_dtensor_from_local(l_half0, mesh, &S0, 1);
  pd_tensor *x_s1 = pd_dist_dtensor_from_local(l_half1, mesh, &S1, 1);
  pd_tensor *x_p = pd_dist_dtensor_from_local(l_whole, mesh, &P, 1);
  pd_tensor *x_r = pd_dist_dtensor_from_local(l_whole, mesh, &R, 1);
  pd_tensor *x_m0 = pd_dist_shard_tensor(l_whole, m0, &R, 1);
  pd_tensor *x_st = pd_dist_shard_tensor(l_whole, stage0, &R, 1);

  /* the raw collectives on tensors of the same sizes */
  raw_case gather = {.kind = 0, .in = filled(2, half0, 1), .out = filled(2, whole, 0)};
  raw_case reduce = {.kind = 1, .in = filled(2, whole, 1), .out = filled(2, whole, 0)};
  raw_case reduce_inplace = {.kind = 5, .in = filled(2, whole, 1)};
  raw_case rscatter = {.kind = 2, .out = filled(2, half0, 0)};
  pd_tensor *rs_whole = filled(2, whole, 1);
  pd_split(rs_whole, 2, NULL, 0, rscatter.list_in, 2);
  raw_case a2a = {.kind = 3};
  for (int k = 0; k < 2; k++) {
    a2a.list_in[k] = filled(2, block, 1);
    a2a.list_out[k] = filled(2, block, 0);
  }
  raw_case send = {.kind = 4, .in = filled(2, whole, 1)};

  struct {
    const char *name, *raw_name;
    reshard_case r;
    raw_case *raw;
    bool aside; /* a comparison shown beside the target, not held to it */
  } cases[] = {
      {"Shard(0) -> Replicate", "all_gather_into_tensor", {x_s0, mesh, {R}, 1}, &gather, false},
      {"Shard(1) -> Replicate", "all_gather_into_tensor", {x_s1, mesh, {R}, 1}, &gather, false},
      {"Partial -> Replicate", "all_reduce (out of place)", {x_p, mesh, {R}, 1}, &reduce, false},
      /* the reshard keeps its input, so the in-place form, working in one
       * buffer that can stay in the cache, is no like-for-like reference */
      {"Partial -> Replicate", "all_reduce (in place)", {x_p, mesh, {R}, 1}, &reduce_inplace, true},
      {"Partial -> Shard(0)", "reduce_scatter", {x_p, mesh, {S0}, 1}, &rscatter, false},
      {"Partial -> Shard(1)", "reduce_scatter", {x_p, mesh, {S1}, 1}, &rscatter, false},
      {"Shard(0) -> Shard(1)", "alltoall", {x_s0, mesh, {S1}, 1}, &a2a, false},
      {"Replicate -> Shard(0)", "(none: a local slice)", {x_r, mesh, {S0}, 1}, NULL, false},
      {"Replicate -> Partial", "(none: a local fill)", {x_r, mesh, {P}, 1}, NULL, false},
      {"[0] -> [1], Replicate", "send/recv", {x_m0, m1, {R}, 1}, &send, false},
      {"stage [0] -> [pp 2, mp 1]", "send/recv", {x_st, g2, {R, R}, 2}, &send, false},
  };
  bool prev = pd_set_grad_enabled(false);
  if (g_rank == 0) {
    printf("1. reshard of float32 [%d, %d] (16 MiB global) on 2 processes, against the raw collective\n", N,
           N);
    printf("%-28s %-26s %11s %11s %9s\n", "transition", "raw collective", "reshard ms", "raw ms", "raw/resh");
  }
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    pd_scope_begin();
    double tr, tw;
    time_pair(run_reshard, &cases[k].r, cases[k].raw ? run_raw : NULL, cases[k].raw, 0.1, &tr, &tw);
    pd_scope_end();
    if (g_rank == 0) {
      if (cases[k].raw)
        printf("%-28s %-26s %11.3f %11.3f %9.2f%s\n", cases[k].name, cases[k].raw_name, tr * 1e3, tw * 1e3,
               tw / tr,
               cases[k].aside   ? "  (aside)"
               : tw / tr >= 0.9 ? ""
                                : "  (< 0.9)");
      else
        printf("%-28s %-26s %11.3f %11s %9s\n", cases[k].name, cases[k].raw_name, tr * 1e3, "", "");
    }
  }
  pd_set_grad_enabled(prev);
  for (pd_tensor **t = (pd_tensor *[]){l_half0,
                                       l_half1,
                                       l_whole,
                                       x_s0,
                                       x_s1,
                                       x_p,
                                       x_r,
                                       x_m0,
                                       x_st,
                                       gather.in,
                                       gather.out,
                                       reduce.in,
                                       reduce.out,
                                       reduce_inplace.in,
                                       rscatter.out,
                                       rs_whole,
                                       rscatter.list_in[0],
                                       rscatter.list_in[1],
                                       a2a.list_in[0],
                                       a2a.list_in[1],
                                       a2a.list_out[0],
                                       a2a.list_out[1],
                                       send.in,
                                       NULL};
       *t; t++)
    pd_tensor_release(*t);
  for (pd_dist_process_mesh **m = (pd_dist_process_mesh *[]){mesh, m0, m1, g2, stage0, NULL}; *m; m++)
    pd_dist_process_mesh_release(*m);
}

/* ---- 2. per-op overhead ------------------------------------------------------- */
typedef struct op_case {
  int kind; /* 0 add, 1 relu, 2 matmul */
  pd_tensor *a, *b;
} op_case;

static void run_op(void *ctx) {
  op_case *c = ctx;
  pd_tensor *r = c->kind == 0   ? pd_add(c->a, c->b)
                 : c->kind == 1 ? pd_relu(c->a)
                                : pd_matmul(c->a, c->b, false, false);
  pd_tensor_release(r);
}

static void bench_op_overhead(void) {
  pd_dist_process_mesh *mesh = pd_dist_process_mesh_new(1, (const int64_t[]){2}, (const int[]){0, 1}, NULL);
  pd_dist_placement S0 = pd_dist_shard(0), R = pd_dist_replicate();
  pd_tensor *v = pd_full(1, (const int64_t[]){32}, 1.5, PD_FLOAT32),
            *w = pd_full(1, (const int64_t[]){32}, 2, PD_FLOAT32);
  pd_tensor *x = pd_full(2, (const int64_t[]){8, 16}, 0.5, PD_FLOAT32),
            *m = pd_full(2, (const int64_t[]){16, 16}, 0.25, PD_FLOAT32);
  pd_tensor *dv = pd_dist_dtensor_from_local(v, mesh, &S0, 1),
            *dw = pd_dist_dtensor_from_local(w, mesh, &S0, 1);
  pd_tensor *dx = pd_dist_dtensor_from_local(x, mesh, &S0, 1),
            *dm = pd_dist_dtensor_from_local(m, mesh, &R, 1);
  struct {
    const char *name;
    op_case local, dist;
  } cases[] = {
      {"add [64] Shard(0) + Shard(0)", {0, v, w}, {0, dv, dw}},
      {"relu [64] Shard(0)", {1, v, NULL}, {1, dv, NULL}},
      {"matmul [16,16] Shard(0) x [16,16] Replicate", {2, x, m}, {2, dx, dm}},
  };
  bool prev = pd_set_grad_enabled(false);
  if (g_rank == 0) {
    printf(
        "\n2. per-op overhead of DTensor ops over the same op on the local shards (no grad; 2 processes)\n");
    printf("%-46s %10s %10s %12s\n", "op", "local us", "DTensor us", "overhead us");
  }
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    double tl, td;
    time_pair(run_op, &cases[k].local, run_op, &cases[k].dist, 0.05, &tl, &td);
    if (g_rank == 0)
      printf("%-46s %10.3f %10.3f %12.3f%s\n", cases[k].name, tl * 1e6, td * 1e6, (td - tl) * 1e6,
             (td - tl) * 1e6 <= 2.0 ? "" : "  (> 2 us)");
  }
  pd_set_grad_enabled(prev);
  for (pd_tensor **t = (pd_tensor *[]){v, w, x, m, dv, dw, dx, dm, NULL}; *t; t++) pd_tensor_release(*t);
  pd_dist_process_mesh_release(mesh);
}

/* ---- 3. DemoNet at hidden 1024 -------------------------------------------------- */
static pd_tensor *demo_data(int step, double f) {
  int64_t n = (int64_t)DEMO_BATCH * DEMO_HIDDEN;
  double *v = malloc((size_t)n * sizeof *v);
  for (int64_t i = 0; i < n; i++) v[i] = sin(f * (double)(i % 9973 + 1) + 0.3 * step);
  pd_tensor *t = pd_tensor_from_f64(v, PD_FLOAT32, 2, (const int64_t[]){DEMO_BATCH, DEMO_HIDDEN});
  free(v);
  return t;
}

/* Seconds per training step; with mesh, linear_0's weight Shard(1) and
 * linear_1's Shard(0). *loss: the last step's loss. */
static double demo_step_time(pd_dist_process_mesh *mesh, double *loss) {
  pd_seed(2024);
  pd_layer *ls[3] = {pd_nn_linear(DEMO_HIDDEN, DEMO_HIDDEN, NULL), pd_nn_relu(),
                     pd_nn_linear(DEMO_HIDDEN, DEMO_HIDDEN, NULL)};
  pd_layer *net = pd_nn_sequential(ls, 3);
  if (mesh) {
    pd_dist_shard_tensor(pd_layer_parameter(ls[0], "weight"), mesh, (pd_dist_placement[]){pd_dist_shard(1)},
                         1);
    pd_dist_shard_tensor(pd_layer_parameter(ls[2], "weight"), mesh, (pd_dist_placement[]){pd_dist_shard(0)},
                         1);
  }
  pd_named_tensors ps;
  pd_layer_parameters(net, &ps);
  pd_optimizer *opt = pd_optimizer_sgd(0.01, ps.tensors, ps.n, NULL);
  pd_named_tensors_free(&ps);
  pd_layer *mse = pd_nn_mse_loss(NULL);
  pd_tensor *x = demo_data(0, 0.37), *y = demo_data(0, 0.53);
  double best = 1e30;
  for (int round = 0; round < 2; round++) {
    if (mesh) pd_dist_barrier(NULL);
    double t0 = bench_now_s();
    for (int s = 0; s < DEMO_STEPS + (round == 0); s++) {
      if (round == 0 && s == 1) t0 = bench_now_s(); /* the first step warms up */
      pd_scope_begin();
      pd_tensor *out = pd_layer_call1(net, x), *l = NULL;
      pd_layer_call(mse, (pd_tensor *[]){out, y}, 2, &l, 1);
      pd_backward(l, NULL, false);
      pd_optimizer_step(opt);
      pd_optimizer_clear_grad(opt, false);
      pd_tensor *lv = mesh ? pd_dist_unshard_dtensor(l) : l;
      *loss = pd_tensor_item(lv);
      pd_scope_end();
    }
    double dt = (bench_now_s() - t0) / DEMO_STEPS;
    if (mesh) dt = world_max(dt);
    if (dt < best) best = dt;
  }
  pd_tensor_release(x);
  pd_tensor_release(y);
  pd_optimizer_release(opt);
  pd_layer_release(mse);
  pd_layer_release(net);
  return best;
}

static int rank_main(int rank, void *arg) {
  int part = *(int *)arg;
  g_rank = rank;
  pd_set_num_threads(1);
  if (!pd_dist_init_parallel_env(NULL)) {
    fprintf(stderr, "init: %s\n", pd_last_error());
    return 1;
  }
  if (part == 0 || part == 1) bench_reshard();
  if (part == 0 || part == 2) bench_op_overhead();
  if (part == 0 || part == 3) {
    pd_dist_process_mesh *mesh = pd_dist_process_mesh_new(1, (const int64_t[]){2}, (const int[]){0, 1}, NULL);
    double loss_one = 0, loss = 0;
    double t_one = world_max(demo_step_time(NULL, &loss_one)), t = demo_step_time(mesh, &loss);
    if (rank == 0) {
      printf("\n3. DemoNet, hidden %d, batch %d, MSELoss, SGD: ms per step (one thread per process)\n",
             DEMO_HIDDEN, DEMO_BATCH);
      printf(
          "   1 process: %.1f ms (loss %.6f)   2 processes, column/row sharded: %.1f ms (loss %.6f)   "
          "speedup %.2fx\n",
          t_one * 1e3, loss_one, t * 1e3, loss, t_one / t);
    }
    pd_dist_process_mesh_release(mesh);
  }
  pd_dist_destroy_process_group(NULL);
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  int part = argc > 1 ? atoi(argv[1]) : 0;
  if (pd_dist_spawn(rank_main, &part, 2, NULL) != PD_OK) {
    fprintf(stderr, "%s\n", pd_last_error());
    return 1;
  }
  return 0;
}
