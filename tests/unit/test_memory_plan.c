/* The executor's buffer planner: hand-derived plans for a chain and a
 * diamond, with and without in-place reuse; refused inputs; and random
 * programs checked against the invariants (no two values alive at once
 * share a byte unless one was written in place over the other, and the
 * arena lies between the live peak and one buffer per value). */
#include <stdlib.h>
#include <string.h>

#include "static/memory_plan.h"
#include "test_util.h"

#define A PD_PLAN_ALIGN

static void expect_refused(pd_status st, const char *text) {
  assert_true(st != PD_OK);
  if (!strstr(pd_last_error(), text)) fail_msg("error '%s' should hold '%s'", pd_last_error(), text);
  pd_clear_error();
}

/* feed -> v1 -> v2 -> v3 (fetched), each 100 bytes (128 aligned) */
static void test_chain(void **state) {
  (void)state;
  pd_plan_value vals[4] = {{100, true, false, false},
                           {100, false, false, false},
                           {100, false, false, false},
                           {100, false, true, false}};
  int i0[] = {0}, o0[] = {1}, i1[] = {1}, o1[] = {2}, i2[] = {2}, o2[] = {3};
  pd_plan_op ops[3] = {{i0, 1, o0, 1, -1}, {i1, 1, o1, 1, -1}, {i2, 1, o2, 1, -1}};
  pd_memory_plan p;
  assert_int_equal(pd_memory_plan_build(vals, 4, ops, 3, &p), PD_OK);
  /* v1 at 0; v2 beside it while op1 reads v1; v3 back in v1's bytes */
  assert_int_equal(p.offset[0], -1);
  assert_int_equal(p.offset[1], 0);
  assert_int_equal(p.offset[2], 2 * A);
  assert_int_equal(p.offset[3], 0);
  assert_int_equal(p.arena_bytes, 4 * A);
  assert_int_equal(p.naive_bytes, 6 * A);
  assert_int_equal(p.live_peak, 4 * A);
  assert_int_equal(p.n_inplace, 0);
  pd_memory_plan_free(&p);

  /* elementwise ops may write over their dying input: one buffer in all */
  for (int k = 0; k < 3; k++) ops[k].inplace_in = 0;
  assert_int_equal(pd_memory_plan_build(vals, 4, ops, 3, &p), PD_OK);
  assert_int_equal(p.offset[1], 0); /* the feed is external: op0 allocates */
  assert_int_equal(p.offset[2], 0);
  assert_int_equal(p.offset[3], 0);
  assert_int_equal(p.arena_bytes, 2 * A);
  assert_int_equal(p.live_peak, 2 * A);
  assert_int_equal(p.n_inplace, 2);
  pd_memory_plan_free(&p);
}

/* a (64) -> b (256), c (64); d = f(b, c) (64); e = g(a, d) (64, fetched).
 * op0: a; op1: b, c from a; op2: d from b, c; op3: e from a, d. */
static void test_diamond(void **state) {
  (void)state;
  pd_plan_value vals[5] = {{64, false, false, false},
                           {256, false, false, false},
                           {64, false, false, false},
                           {64, false, false, false},
                           {60, false, true, false}};
  int o0[] = {0}, i1[] = {0}, o1[] = {1, 2}, i2[] = {1, 2}, o2[] = {3}, i3[] = {0, 3}, o3[] = {4};
  pd_plan_op ops[4] = {{NULL, 0, o0, 1, -1}, {i1, 1, o1, 2, -1}, {i2, 2, o2, 1, -1}, {i3, 2, o3, 1, 1}};
  pd_memory_plan p;
  assert_int_equal(pd_memory_plan_build(vals, 5, ops, 4, &p), PD_OK);
  /* a [0,64); b [64,320); c [320,384); d: b and c die after op2, so d is new
   * at [384,448); then b and c free [64,384); e over d in place (d dies at
   * op3, same aligned size) */
  assert_int_equal(p.offset[0], 0);
  assert_int_equal(p.offset[1], 64);
  assert_int_equal(p.offset[2], 320);
  assert_int_equal(p.offset[3], 384);
  assert_int_equal(p.offset[4], 384);
  assert_int_equal(p.n_inplace, 1);
  assert_int_equal(p.arena_bytes, 448);
  assert_int_equal(p.live_peak, 448); /* during op2: a, b, c, d */
  pd_memory_plan_free(&p);
}

static void test_refused(void **state) {
  (void)state;
  pd_plan_value vals[2] = {{8, false, false, false}, {8, false, false, false}};
  int v0[] = {0}, v1[] = {1}, bad[] = {7};
  pd_memory_plan p;
  pd_plan_op before[1] = {{v0, 1, v1, 1, -1}};
  expect_refused(pd_memory_plan_build(vals, 2, before, 1, &p), "op 0 reads value 0 before any op writes it");
  assert_null(p.offset);
  pd_plan_op twice[2] = {{NULL, 0, v0, 1, -1}, {NULL, 0, v0, 1, -1}};
  expect_refused(pd_memory_plan_build(vals, 2, twice, 2, &p), "value 0 is written by op 0 and again by op 1");
  pd_plan_op range[1] = {{NULL, 0, bad, 1, -1}};
  expect_refused(pd_memory_plan_build(vals, 2, range, 1, &p), "op 0 writes value 7 (there are 2)");
  pd_plan_op inpl[1] = {{NULL, 0, v0, 1, 0}};
  expect_refused(pd_memory_plan_build(vals, 2, inpl, 1, &p), "inplace input 0 of 0 inputs");
  pd_plan_value ext[1] = {{8, true, false, false}};
  pd_plan_op write_ext[1] = {{NULL, 0, v0, 1, -1}};
  expect_refused(pd_memory_plan_build(ext, 1, write_ext, 1, &p), "lives outside the plan");
  /* nothing to plan is a plan of nothing */
  assert_int_equal(pd_memory_plan_build(NULL, 0, NULL, 0, &p), PD_OK);
  assert_int_equal(p.arena_bytes, 0);
  pd_memory_plan_free(&p);
}

/* A bucket written in parts (shared_writes): b (v0) is written by op0 and
 * op2 and read by op3. It is placed at its first write and stays live
 * until its last use, so t (v1, op1 -> op2) goes beside it; no output goes
 * over it in place, nor it over an input. A value that is not
 * shared_writes is still refused a second write. */
static void test_shared_writes(void **state) {
  (void)state;
  pd_plan_value vals[4] = {{256, false, false, true},
                           {64, false, false, false},
                           {64, false, false, false},
                           {64, false, true, false}};
  int b[] = {0}, t[] = {1}, u[] = {2}, e[] = {3};
  /* op0: part of b; op1: t; op2: b's other part from t (in place asked); op3: e from b (in place asked) */
  pd_plan_op ops[4] = {{NULL, 0, b, 1, -1}, {NULL, 0, t, 1, -1}, {t, 1, b, 1, 0}, {b, 1, e, 1, 0}};
  pd_memory_plan p;
  assert_int_equal(pd_memory_plan_build(vals, 4, ops, 4, &p), PD_OK);
  assert_int_equal(p.offset[0], 0);
  assert_int_equal(p.offset[1], 256);
  assert_int_equal(p.offset[3], 256); /* b is read at op3, so e goes where t was (t died at op2) */
  assert_int_equal(p.n_inplace, 0);
  assert_int_equal(p.arena_bytes, 320);
  pd_memory_plan_free(&p);
  /* an op reading and writing the bucket (the coalesce) as its last use frees it once */
  pd_plan_op last[3] = {{NULL, 0, b, 1, -1}, {b, 1, b, 1, -1}, {NULL, 0, u, 1, -1}};
  assert_int_equal(pd_memory_plan_build(vals, 4, last, 3, &p), PD_OK);
  assert_int_equal(p.offset[2], 0); /* u reuses the freed bucket */
  assert_int_equal(p.arena_bytes, 256);
  pd_memory_plan_free(&p);
  vals[0].shared_writes = false;
  expect_refused(pd_memory_plan_build(vals, 4, ops, 4, &p), "value 0 is written by op 0 and again by op 2");
}

static unsigned rnd(unsigned *s) {
  *s = *s * 1103515245u + 12345u;
  return (*s >> 8) & 0xffffff;
}

static size_t up(size_t n) { return (n + A - 1) / A * A; }

/* Op order fragments; placing the largest values first does not:
 * op0: s1 (64, fetched); op1: B1 (1024); op2: s2 (64, fetched) from B1;
 * op3: B2 (1088); op4: reads B2, s1, s2. Best fit in op order puts s2 after
 * B1, so B2 fits neither B1's freed 1024 bytes nor the end: 2240 bytes.
 * Largest first: B2 and B1 at 0 (their lifetimes do not meet), s1 and s2
 * above them: 1216 bytes, the live peak. */
static void test_fragmentation(void **state) {
  (void)state;
  pd_plan_value vals[4] = {{64, false, true, false},
                           {1024, false, false, false},
                           {64, false, true, false},
                           {1088, false, false, false}};
  int o0[] = {0}, o1[] = {1}, i2[] = {1}, o2[] = {2}, o3[] = {3}, i4[] = {3, 0, 2};
  pd_plan_op ops[5] = {{NULL, 0, o0, 1, -1},
                       {NULL, 0, o1, 1, -1},
                       {i2, 1, o2, 1, -1},
                       {NULL, 0, o3, 1, -1},
                       {i4, 3, NULL, 0, -1}};
  pd_memory_plan p;
  assert_int_equal(pd_memory_plan_build(vals, 4, ops, 5, &p), PD_OK);
  assert_int_equal(p.live_peak, 1216);
  assert_int_equal(p.arena_bytes, 1216);
  assert_int_equal(p.offset[3], 0);
  assert_int_equal(p.offset[1], 0);
  assert_true(p.offset[0] >= 1088 && p.offset[2] >= 1088 && p.offset[0] != p.offset[2]);
  pd_memory_plan_free(&p);
}

/* Random programs: the plan never lets two values alive at the same op share
 * a byte, except an output written in place over an input dying there. */
static void test_random_programs(void **state) {
  (void)state;
  unsigned seed = 12345;
  for (int trial = 0; trial < 300; trial++) {
    int n_ext = 1 + (int)(rnd(&seed) % 3), n_ops = 1 + (int)(rnd(&seed) % 40);
    int cap = n_ext + 2 * n_ops;
    pd_plan_value *vals = calloc((size_t)cap, sizeof *vals);
    pd_plan_op *ops = calloc((size_t)n_ops, sizeof *ops);
    int *ins = calloc((size_t)n_ops * 3, sizeof(int)), *outs = calloc((size_t)n_ops * 2, sizeof(int));
    int nv = 0;
    for (; nv < n_ext; nv++) vals[nv] = (pd_plan_value){1 + rnd(&seed) % 300, true, false, false};
    for (int i = 0; i < n_ops; i++) {
      int ni = 1 + (int)(rnd(&seed) % 3), no = 1 + (int)(rnd(&seed) % 2);
      for (int k = 0; k < ni; k++) ins[3 * i + k] = (int)(rnd(&seed) % (unsigned)nv);
      for (int k = 0; k < no; k++) {
        /* same sizes often, so in-place reuse happens */
        size_t bytes = rnd(&seed) % 2 ? vals[ins[3 * i]].bytes : 1 + rnd(&seed) % 500;
        vals[nv] = (pd_plan_value){bytes, false, rnd(&seed) % 8 == 0, false};
        outs[2 * i + k] = nv++;
      }
      ops[i] = (pd_plan_op){ins + 3 * i, ni, outs + 2 * i, no,
                            rnd(&seed) % 2 ? (int)(rnd(&seed) % (unsigned)ni) : -1};
    }
    pd_memory_plan p;
    assert_int_equal(pd_memory_plan_build(vals, nv, ops, n_ops, &p), PD_OK);
    /* lifetimes, derived here independently */
    int first[128], last[128];
    for (int v = 0; v < nv; v++) first[v] = last[v] = -1;
    for (int i = 0; i < n_ops; i++) {
      for (int k = 0; k < ops[i].n_in; k++) last[ops[i].in[k]] = i;
      for (int k = 0; k < ops[i].n_out; k++) first[ops[i].out[k]] = last[ops[i].out[k]] = i;
    }
    for (int v = 0; v < nv; v++)
      if (vals[v].keep) last[v] = n_ops;
    size_t naive = 0, peak = 0;
    for (int v = n_ext; v < nv; v++) {
      assert_true(p.offset[v] >= 0);
      assert_true((size_t)p.offset[v] + up(vals[v].bytes) <= p.arena_bytes);
      assert_int_equal(p.offset[v] % A, 0);
      naive += up(vals[v].bytes);
    }
    for (int v = 0; v < n_ext; v++) assert_int_equal(p.offset[v], -1);
    for (int u = n_ext; u < nv; u++)
      for (int v = u + 1; v < nv; v++) {
        bool alive_together = first[u] <= last[v] && first[v] <= last[u];
        bool share = p.offset[u] < p.offset[v] + (int64_t)up(vals[v].bytes) &&
                     p.offset[v] < p.offset[u] + (int64_t)up(vals[u].bytes);
        if (!alive_together || !share) continue;
        /* allowed only in place: v is output 0 of the op where u dies,
         * which names u as its in-place input, same bytes */
        const pd_plan_op *op = &ops[first[v]];
        bool inplace = last[u] == first[v] && op->out[0] == v && op->inplace_in >= 0 &&
                       op->in[op->inplace_in] == u && p.offset[u] == p.offset[v] &&
                       up(vals[u].bytes) == up(vals[v].bytes) && !vals[u].keep;
        if (!inplace)
          fail_msg("trial %d: values %d [%d,%d] and %d [%d,%d] share bytes (offsets %lld, %lld)", trial, u,
                   first[u], last[u], v, first[v], last[v], (long long)p.offset[u], (long long)p.offset[v]);
      }
    for (int i = 0; i < n_ops; i++) {
      size_t live = 0;
      for (int v = n_ext; v < nv; v++) {
        if (first[v] > i || i > last[v]) continue;
        bool handed_on = false; /* counted once with the output written over it */
        const pd_plan_op *op = &ops[i];
        if (last[v] == i && op->inplace_in >= 0 && op->in[op->inplace_in] == v && op->out[0] != v &&
            p.offset[op->out[0]] == p.offset[v])
          handed_on = true;
        if (!handed_on) live += up(vals[v].bytes);
      }
      if (live > peak) peak = live;
    }
    assert_int_equal(p.naive_bytes, naive);
    assert_int_equal(p.live_peak, peak);
    assert_true(p.live_peak <= p.arena_bytes);
    assert_true(p.arena_bytes <= p.naive_bytes);
    pd_memory_plan_free(&p);
    free(vals), free(ops), free(ins), free(outs);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_chain),           cmocka_unit_test(test_diamond),
      cmocka_unit_test(test_refused),         cmocka_unit_test(test_shared_writes),
      cmocka_unit_test(test_random_programs), cmocka_unit_test(test_fragmentation),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
