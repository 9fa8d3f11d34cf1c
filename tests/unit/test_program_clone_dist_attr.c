/* A clone of a Program keeps its Variables' dist attrs: each Variable of
 * the clone holds a copy of its source's (the same mesh and placements,
 * its own storage), so Strategy.gradient_merge's accumulate Program (a
 * clone of the train Program) keeps the parameters' placements, and
 * either Program can be released first. */
#include <stdlib.h>
#include <string.h>

#include "distributed/auto_parallel/dist_program.h"
#include "paddlec.h"
#include "test_util.h"

static void test_clone_copies_dist_attr(void **state) {
  (void)state;
  pd_dist_process_mesh *mesh = pd_dist_process_mesh_new(1, SHAPE(2), (const int[]){0, 1}, NULL);
  assert_non_null(mesh);
  pd_program *p = pd_static_program();
  assert_non_null(p);
  pd_static_block *b = pd_program_global_block(p);
  pd_variable *w = pd_ir_add_var(b, "w", PD_FLOAT32, 2, SHAPE(4, 6), NULL);
  pd_variable *x = pd_ir_add_var(b, "x", PD_FLOAT32, 1, SHAPE(6), NULL);
  assert_non_null(w);
  assert_non_null(x);
  pd_dist_placement shard1 = pd_dist_shard(1);
  pd_dist_attr *a = pd_ap_attr_new(mesh, &shard1, w->ndim, w->shape);
  assert_non_null(a);
  pd_ap_var_set_attr(w, a);

  pd_program *c = pd_program_clone(p, false);
  assert_non_null(c);
  const pd_variable *cw = pd_ir_find_var(pd_program_global_block(c), "w");
  const pd_variable *cx = pd_ir_find_var(pd_program_global_block(c), "x");
  assert_non_null(cw);
  assert_non_null(cx);
  const pd_dist_attr *ca = pd_ap_var_attr(cw);
  assert_non_null(ca);
  assert_ptr_not_equal(ca, a);
  assert_ptr_equal(ca->mesh, mesh);
  assert_int_equal(ca->n, 1);
  assert_int_equal(ca->p[0].kind, PD_DIST_SHARD);
  assert_int_equal(ca->p[0].dim, 1);
  assert_int_equal(ca->ndim, 2);
  assert_int_equal(ca->shape[0], 4);
  assert_int_equal(ca->shape[1], 6);
  assert_null(pd_ap_var_attr(cx)); /* replicated stays replicated */

  pd_program_release(p); /* the clone's attr is its own */
  assert_int_equal(pd_ap_var_attr(cw)->p[0].dim, 1);
  pd_program_release(c);
  pd_dist_process_mesh_release(mesh);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_clone_copies_dist_attr),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
