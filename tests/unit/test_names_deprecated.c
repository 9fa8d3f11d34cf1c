/* The names renamed by docs/architecture.md's naming rules still build and
 * behave as the new ones for one release (they are macros for the new names). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "paddlec/hapi.h"
#include "test_util.h"

static void old_loader_names(void **state) {
  (void)state;
  pd_tensor *x = T(PD_FLOAT32, 1, SHAPE(4), 1, 2, 3, 4);
  pd_io_dataset *ds = pd_io_tensor_dataset(&x, 1);
  pd_io_loader *l = pd_io_data_loader(ds, &(pd_io_data_loader_opts){.batch_size = 2});
  assert_non_null(l);
  assert_int_equal(pd_io_data_loader_len(l), 2);
  pd_tensor *b[2];
  assert_int_equal(pd_io_data_loader_next(l, b, 2), 1);
  EXPECT_VALUES(b[0], 0, 1, 2);
  pd_tensor_release(b[0]);
  assert_int_equal(pd_io_data_loader_reset(l), PD_OK);
  assert_int_equal(pd_io_data_loader_next(l, b, 2), 1);
  EXPECT_VALUES(b[0], 0, 1, 2);
  pd_tensor_release(b[0]);
  pd_io_data_loader_destroy(l);
  pd_io_dataset_release(ds);
  pd_tensor_release(x);
  expect_no_live_tensors();
}

static void old_checkpoint_and_layer_names(void **state) {
  (void)state;
  char dir[] = "/tmp/pd_deprecated_XXXXXX";
  assert_non_null(mkdtemp(dir));
  char path[64];
  snprintf(path, sizeof path, "%s/w.safetensors", dir);
  pd_layer *net = pd_nn_linear(2, 3, NULL);
  pd_named_tensors ps = {0};
  assert_int_equal(pd_layer_named_parameters_ex(net, "net", true, &ps), PD_OK);
  assert_int_equal(ps.n, 2);
  assert_string_equal(ps.names[0], "net.weight");
  pd_string_map meta = {0};
  assert_int_equal(pd_string_map_set(&meta, "step", "7"), PD_OK);
  assert_int_equal(pd_save_ex(&ps, path, &meta), PD_OK);
  pd_string_map_free(&meta);
  pd_named_tensors_free(&ps);
  pd_named_tensors back = {0};
  assert_int_equal(pd_load_ex(path, &back, &meta), PD_OK);
  assert_int_equal(back.n, 2);
  assert_string_equal(pd_string_map_get(&meta, "step"), "7");
  pd_state_free(&back);
  pd_string_map_free(&meta);
  assert_int_equal(pd_flops_ex(net, 2, SHAPE(1, 2), &(pd_flops_opts){.quiet = true}, NULL), 2 * 3);
  pd_layer_release(net);
  unlink(path);
  rmdir(dir);
  /* the release forms accept NULL as the old ones did */
  pd_model_free(NULL);
  pd_dist_task_free(NULL);
  pd_io_npz_free(NULL);
  pd_dist_env env = {0};
  pd_dist_env_clear(&env);
  /* fleet.utils.fused_allreduce_gradients under its old pd_dist_ name */
  assert_ptr_equal((void (*)(void))pd_dist_fused_allreduce_gradients,
                   (void (*)(void))pd_fleet_utils_fused_allreduce_gradients);
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(old_loader_names),
      cmocka_unit_test(old_checkpoint_and_layer_names),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
