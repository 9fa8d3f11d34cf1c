/* Seed 000: paddle.distributed.to_static on DemoNet, in C.
 *
 *   fleetrun --nproc_per_node=2 ./dist_to_static
 *
 * DemoNet (Linear(16, 16) -> ReLU -> Linear(16, 8)) with linear_0.weight
 * Shard(1) and linear_1.weight Shard(0) on ProcessMesh([0, 1], ["x"]),
 * MSELoss and SGD(0.1) become a DistModel and a DistributedDataLoader; the
 * train, eval and predict loops run as in the seed, printing each loss and
 * the shape of each predict output "out0". The program then repeats the
 * train and eval loops on the same model without sharding and exits 1
 * unless the losses agree to 1e-6. Run alone it uses a mesh of one process. */
#include <math.h>
#include <paddlec.h>
#include <stdio.h>
#include <stdlib.h>

#include "world_mesh.h"

enum { BATCH_SIZE = 4, BATCH_NUM = 4, IMAGE_SIZE = 16, CLASS_NUM = 8 };

/* RandomDataset(images, labels, num_samples) */
typedef struct random_dataset {
  double images[BATCH_SIZE * BATCH_NUM][IMAGE_SIZE], labels[BATCH_SIZE * BATCH_NUM][CLASS_NUM];
  int64_t num_samples;
} random_dataset;

static int64_t ds_len(void *user) { return ((random_dataset *)user)->num_samples; }
static int ds_get_item(void *user, int64_t idx, pd_tensor **out, int max_out) {
  random_dataset *d = user;
  if (max_out < 2) return pd_set_error(PD_ERR_INVALID, "RandomDataset: room for 2 fields needed");
  out[0] = pd_tensor_from_f64(d->images[idx], PD_FLOAT32, 1, (const int64_t[]){IMAGE_SIZE});
  out[1] = pd_tensor_from_f64(d->labels[idx], PD_FLOAT32, 1, (const int64_t[]){CLASS_NUM});
  return 2;
}

/* class DemoNet(nn.Layer): linear_0 -> relu -> linear_1, as the seed
 * writes it, so the parameters are named linear_0.weight, linear_1.weight. */
typedef struct demo_net {
  pd_layer base;
  pd_layer *linear_0, *linear_1, *relu;
} demo_net;

static int demo_net_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  (void)n_in, (void)max_out;
  demo_net *net = (demo_net *)self;
  pd_tensor *h = pd_layer_call1(net->linear_0, in[0]);
  h = pd_layer_call1(net->relu, h);
  out[0] = pd_layer_call1(net->linear_1, h);
  return out[0] ? 1 : pd_last_status();
}

static const pd_layer_type demo_net_type = {.name = "DemoNet", .forward = demo_net_forward};

static pd_layer *demo_net_new(pd_dist_process_mesh *mesh) {
  pd_seed(2024); /* the same initial weights on every rank */
  demo_net *net = pd_layer_new(sizeof *net, &demo_net_type);
  if (!net) return NULL;
  net->linear_0 = pd_layer_add_sublayer(&net->base, "linear_0", pd_nn_linear(IMAGE_SIZE, IMAGE_SIZE, NULL));
  net->linear_1 = pd_layer_add_sublayer(&net->base, "linear_1", pd_nn_linear(IMAGE_SIZE, CLASS_NUM, NULL));
  net->relu = pd_layer_add_sublayer(&net->base, "relu", pd_nn_relu());
  if (!net->linear_0 || !net->linear_1 || !net->relu) {
    pd_layer_release(&net->base);
    return NULL;
  }
  if (mesh) { /* shard the weights of this layer, in place */
    pd_tensor *w0 = pd_layer_parameter(net->linear_0, "weight");
    pd_tensor *w1 = pd_layer_parameter(net->linear_1, "weight");
    pd_tensor *s0 = pd_dist_shard_tensor(w0, mesh, (pd_dist_placement[]){pd_dist_shard(1)}, 1);
    pd_tensor *s1 = pd_dist_shard_tensor(w1, mesh, (pd_dist_placement[]){pd_dist_shard(0)}, 1);
    if (!s0 || !s1) {
      pd_layer_release(&net->base);
      return NULL;
    }
    pd_tensor_release(s0);
    pd_tensor_release(s1);
  }
  return &net->base;
}

/* Runs the seed's train, eval and predict loops; writes the train losses
 * then the eval losses. 0 on success. */
static int run(pd_dist_process_mesh *mesh, pd_io_dataset *ds, double *losses, int rank, bool print) {
  pd_layer *layer = demo_net_new(mesh);
  pd_io_loader *loader = pd_io_data_loader(ds, &(pd_io_data_loader_opts){.batch_size = BATCH_SIZE});
  pd_named_tensors ps;
  if (!layer || !loader || pd_layer_parameters(layer, &ps) != PD_OK) return 1;
  pd_optimizer *opt = pd_optimizer_sgd(0.1, ps.tensors, ps.n, NULL);
  pd_named_tensors_free(&ps);
  pd_layer *loss_fn = pd_nn_mse_loss(NULL);
  pd_dist_model *dist_model = NULL;
  pd_dist_data_loader *dist_loader = NULL;
  int rc = opt && loss_fn ? 0 : 1;
  if (rc == 0 &&
      pd_dist_to_static(layer, loader, NULL, loss_fn, opt, NULL, &dist_model, &dist_loader) != PD_OK)
    rc = 1;
  pd_named_tensors sd = {0};
  if (rc == 0 && print && pd_dist_model_state_dict(dist_model, "param", &sd) == PD_OK)
    for (int i = 0; i < sd.n; i++) {
      char buf[256];
      printf("rank %d: state_dict %s %s\n", rank, sd.names[i],
             pd_dist_is_dist(sd.tensors[i]) ? pd_dist_attr_str(sd.tensors[i], buf, sizeof buf) : "dense");
    }
  pd_named_tensors_free(&sd);
  int k = 0;
  const char *modes[] = {"train", "eval"};
  for (int phase = 0; phase < 2 && rc == 0; phase++) {
    if ((phase == 0 ? pd_dist_model_train(dist_model) : pd_dist_model_eval(dist_model)) != PD_OK) rc = 1;
    pd_tensor *batch[2], *loss;
    for (int batch_id = 0; rc == 0; batch_id++) {
      pd_scope_begin();
      int n = pd_dist_data_loader_next(dist_loader, batch, 2);
      if (n < 0 || (n > 0 && pd_dist_model_call(dist_model, batch, n, &loss, 1) != 1)) rc = 1;
      if (n > 0 && rc == 0) {
        losses[k++] = pd_tensor_item(loss);
        if (print) printf("rank %d: %s batch %d loss %.7f\n", rank, modes[phase], batch_id, losses[k - 1]);
      }
      pd_scope_end();
      if (n == 0) break;
    }
  }
  if (rc == 0 && pd_dist_model_predict(dist_model) != PD_OK) rc = 1;
  for (int batch_id = 0; rc == 0; batch_id++) {
    pd_tensor *batch[2], *outs[4];
    pd_scope_begin();
    int n = pd_dist_data_loader_next(dist_loader, batch, 2);
    int n_out = n > 0 ? pd_dist_model_call(dist_model, batch, 1, outs, 4) : 0;
    if (n < 0 || n_out < 0 || (n > 0 && n_out < 1)) rc = 1;
    if (n > 0 && rc == 0 && print) {
      char name[16];
      printf("rank %d: predict batch %d %s shape [%lld, %lld]\n", rank, batch_id,
             pd_dist_model_output_name(0, name, sizeof name), (long long)pd_tensor_shape(outs[0])[0],
             (long long)pd_tensor_shape(outs[0])[1]);
    }
    pd_scope_end();
    if (n == 0) break;
  }
  pd_dist_model_release(dist_model);
  pd_dist_data_loader_release(dist_loader);
  pd_io_loader_release(loader);
  pd_optimizer_release(opt);
  pd_layer_release(loss_fn);
  pd_layer_release(layer);
  return rc;
}

int main(void) {
  pd_dist_process_mesh *mesh = world_mesh_init();
  if (!mesh) return 1;
  int rank = pd_dist_get_rank(NULL);
  /* images = np.random.rand(...), the same on every rank */
  static random_dataset data = {.num_samples = BATCH_SIZE * BATCH_NUM};
  for (int i = 0; i < BATCH_SIZE * BATCH_NUM; i++) {
    for (int j = 0; j < IMAGE_SIZE; j++) data.images[i][j] = 0.5 + 0.5 * sin(0.37 * (i * IMAGE_SIZE + j + 1));
    for (int j = 0; j < CLASS_NUM; j++) data.labels[i][j] = 0.5 + 0.5 * sin(0.53 * (i * CLASS_NUM + j + 1));
  }
  pd_io_dataset *ds = pd_io_dataset_new(&(pd_io_dataset_fns){.len = ds_len, .get_item = ds_get_item}, &data);
  double sharded[2 * BATCH_NUM], single[2 * BATCH_NUM];
  int rc = ds ? run(mesh, ds, sharded, rank, true) : 1;
  if (rc == 0) rc = run(NULL, ds, single, rank, false);
  if (rc != 0) fprintf(stderr, "rank %d: %s\n", rank, pd_last_error());
  if (rc == 0)
    rc = world_mesh_check_losses(sharded, single, 2 * BATCH_NUM, BATCH_NUM, "train and eval losses");
  pd_io_dataset_release(ds);
  pd_dist_process_mesh_release(mesh);
  pd_dist_destroy_process_group(NULL);
  return rc;
}
