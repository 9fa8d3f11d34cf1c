/* paddle.distributed.to_static: DistModel and DistributedDataLoader.
 *
 * A DistModel call runs one step of the layer on its DTensor parameters:
 * every op goes through the dispatcher's DTensor handler, whose SPMD rules
 * pick the output placements and insert the reshards; the loss is unsharded
 * before it is returned, so every rank returns the global value. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paddlec.h"

struct pd_dist_model {
  pd_layer *layer, *loss;
  pd_optimizer *opt;
  pd_dist_model_mode mode;
};

struct pd_dist_data_loader {
  pd_io_loader *loader;
  pd_dist_shard_dataloader *shard_loader;
};

/* Passes that are not implemented are refused by name. */
static pd_status check_strategy(const pd_dist_strategy *s) {
  if (!s) return PD_OK;
  pd_status st = pd_dist_strategy_check(s);
  if (st != PD_OK) return st;
  const char *pass = s->sharding.enable         ? "sharding"
                     : s->gradient_merge.enable ? "gradient_merge"
                     : s->recompute.enable      ? "recompute"
                     : s->fused_passes.enable   ? "fused_passes"
                     : s->pipeline.enable       ? "pipeline"
                     : s->amp.enable            ? "amp"
                                                : NULL;
  if (pass)
    return pd_set_error(PD_ERR_UNIMPLEMENTED, "dist.to_static: Strategy.%s is not supported yet", pass);
  return PD_OK;
}

pd_status pd_dist_to_static(pd_layer *layer, pd_io_loader *loader, pd_dist_shard_dataloader *shard_loader,
                            pd_layer *loss, pd_optimizer *opt, const pd_dist_strategy *strategy,
                            pd_dist_model **model, pd_dist_data_loader **dist_loader) {
  if (!layer || !model || !dist_loader)
    return pd_set_error(PD_ERR_INVALID, "dist.to_static: layer, model and dist_loader must not be NULL");
  if ((loader == NULL) == (shard_loader == NULL))
    return pd_set_error(PD_ERR_INVALID,
                        "dist.to_static: give exactly one of a DataLoader and a ShardDataloader");
  pd_status st = check_strategy(strategy);
  if (st != PD_OK) return st;
  pd_dist_model *m = calloc(1, sizeof *m);
  pd_dist_data_loader *l = calloc(1, sizeof *l);
  if (!m || !l) {
    free(m);
    free(l);
    return pd_set_error(PD_ERR_MEMORY, "dist.to_static: out of memory");
  }
  m->layer = layer;
  m->loss = loss;
  m->opt = opt;
  m->mode = loss && opt ? PD_DIST_MODE_TRAIN : loss ? PD_DIST_MODE_EVAL : PD_DIST_MODE_PREDICT;
  l->loader = loader;
  l->shard_loader = shard_loader;
  *model = m;
  *dist_loader = l;
  return PD_OK;
}

void pd_dist_model_release(pd_dist_model *m) { free(m); }

pd_status pd_dist_model_train(pd_dist_model *m) {
  if (!m) return pd_set_error(PD_ERR_INVALID, "DistModel.train: model is NULL");
  if (!m->opt)
    return pd_set_error(PD_ERR_STATE, "DistModel.train: the optimizer is not given to dist.to_static");
  if (!m->loss) return pd_set_error(PD_ERR_STATE, "DistModel.train: the loss is not given to dist.to_static");
  m->mode = PD_DIST_MODE_TRAIN;
  pd_layer_train(m->layer);
  return PD_OK;
}

pd_status pd_dist_model_eval(pd_dist_model *m) {
  if (!m) return pd_set_error(PD_ERR_INVALID, "DistModel.eval: model is NULL");
  if (!m->loss) return pd_set_error(PD_ERR_STATE, "DistModel.eval: the loss is not given to dist.to_static");
  m->mode = PD_DIST_MODE_EVAL;
  pd_layer_eval(m->layer);
  return PD_OK;
}

pd_status pd_dist_model_predict(pd_dist_model *m) {
  if (!m) return pd_set_error(PD_ERR_INVALID, "DistModel.predict: model is NULL");
  m->mode = PD_DIST_MODE_PREDICT;
  pd_layer_eval(m->layer);
  return PD_OK;
}

pd_dist_model_mode pd_dist_model_get_mode(const pd_dist_model *m) { return m ? m->mode : PD_DIST_MODE_NONE; }

const char *pd_dist_model_output_name(int i, char *buf, size_t cap) {
  if (!buf || cap == 0) return NULL;
  snprintf(buf, cap, "out%d", i);
  return buf;
}

/* A dense global copy of t, moved out of the step's scope. */
static pd_tensor *global_value(pd_tensor *t) {
  pd_tensor *v = pd_dist_is_dist(t) ? pd_dist_unshard_dtensor(t) : t;
  return v ? pd_keep(v) : NULL;
}

int pd_dist_model_call(pd_dist_model *m, pd_tensor *const *inputs, int n_inputs, pd_tensor **out,
                       int max_out) {
  if (!m || (n_inputs > 0 && !inputs) || !out || max_out < 1)
    return pd_set_error(PD_ERR_INVALID, "DistModel.__call__: model, inputs and out must not be NULL");
  static const char *const names[] = {"", "train", "eval", "predict"};
  if (m->mode == PD_DIST_MODE_NONE)
    return pd_set_error(PD_ERR_STATE,
                        "DistModel.__call__: no mode set; call train(), eval() or predict() first");
  int want = m->mode == PD_DIST_MODE_PREDICT ? 1 : 2;
  if (n_inputs != want)
    return pd_set_error(PD_ERR_INVALID,
                        "DistModel.__call__ in %s mode: expects %d inputs (feed names: %s), got %d",
                        names[m->mode], want, want == 1 ? "input0" : "input0, label0", n_inputs);
  int rc = 0;
  pd_scope_begin();
  pd_tensor *outs[16];
  int n_out = pd_layer_call(m->layer, inputs, 1, outs, 16);
  if (n_out < 1) {
    rc = n_out < 0 ? n_out : pd_set_error(PD_ERR_STATE, "DistModel.__call__: the layer returned no output");
  } else if (m->mode == PD_DIST_MODE_PREDICT) {
    if (n_out > max_out) n_out = max_out;
    for (int i = 0; i < n_out && rc == 0; i++)
      if (!(out[i] = global_value(outs[i]))) rc = PD_ERR_STATE;
    if (rc == 0) rc = n_out;
  } else {
    pd_tensor *loss = NULL;
    int nl = pd_layer_call(m->loss, (pd_tensor *[]){outs[0], inputs[1]}, 2, &loss, 1);
    if (nl < 1)
      rc = nl < 0 ? nl : pd_set_error(PD_ERR_STATE, "DistModel.__call__: the loss returned nothing");
    if (rc == 0 && m->mode == PD_DIST_MODE_TRAIN) {
      pd_status st = pd_backward(loss, NULL, false);
      if (st == PD_OK) st = pd_optimizer_step(m->opt);
      if (st == PD_OK) pd_optimizer_clear_grad(m->opt, false);
      rc = st;
    }
    if (rc == 0) rc = (out[0] = global_value(loss)) ? 1 : PD_ERR_STATE;
  }
  pd_scope_end();
  return rc;
}

/* Appends src's entries to dst (names copied). */
static pd_status append_named(pd_named_tensors *dst, const pd_named_tensors *src) {
  int n = dst->n + src->n;
  char **names = realloc(dst->names, (size_t)(n ? n : 1) * sizeof *names);
  if (names) dst->names = names;
  pd_tensor **ts = names ? realloc(dst->tensors, (size_t)(n ? n : 1) * sizeof *ts) : NULL;
  if (!ts) return pd_set_error(PD_ERR_MEMORY, "DistModel.state_dict: out of memory");
  dst->tensors = ts;
  for (int i = 0; i < src->n; i++) {
    if (!(dst->names[dst->n] = strdup(src->names[i])))
      return pd_set_error(PD_ERR_MEMORY, "DistModel.state_dict: out of memory");
    dst->tensors[dst->n++] = src->tensors[i];
  }
  return PD_OK;
}

pd_status pd_dist_model_state_dict(pd_dist_model *m, const char *mode, pd_named_tensors *out) {
  if (!m || !out) return pd_set_error(PD_ERR_INVALID, "DistModel.state_dict: model and out must not be NULL");
  if (!mode) mode = "all";
  bool all = strcmp(mode, "all") == 0, param = all || strcmp(mode, "param") == 0,
       opt = all || strcmp(mode, "opt") == 0;
  if (!param && !opt)
    return pd_set_error(PD_ERR_INVALID, "DistModel.state_dict: mode '%s' is none of 'opt', 'param', 'all'",
                        mode);
  *out = (pd_named_tensors){0};
  pd_named_tensors part = {0};
  pd_status st = param ? pd_layer_state_dict(m->layer, &part) : PD_OK;
  if (st == PD_OK) st = append_named(out, &part);
  pd_named_tensors_free(&part);
  if (st == PD_OK && opt && m->opt) {
    st = pd_optimizer_state_dict(m->opt, &part);
    if (st == PD_OK) st = append_named(out, &part);
    pd_named_tensors_free(&part);
  }
  if (st != PD_OK) pd_named_tensors_free(out);
  return st;
}

pd_status pd_dist_model_set_state_dict(pd_dist_model *m, const pd_named_tensors *sd) {
  if (!m || !sd)
    return pd_set_error(PD_ERR_INVALID, "DistModel.set_state_dict: model and sd must not be NULL");
  pd_named_tensors unexpected = {0};
  pd_status st = pd_layer_set_state_dict(m->layer, sd, NULL, &unexpected);
  if (st == PD_OK && unexpected.n > 0) {
    if (m->opt)
      st = pd_optimizer_set_state_dict(m->opt, &unexpected);
    else
      st = pd_set_error(PD_ERR_INVALID,
                        "DistModel.set_state_dict: '%s' is neither a parameter nor an optimizer state",
                        unexpected.names[0]);
  }
  pd_named_tensors_free(&unexpected);
  return st;
}

int pd_dist_data_loader_next(pd_dist_data_loader *l, pd_tensor **batch, int max) {
  if (!l) return pd_set_error(PD_ERR_INVALID, "DistributedDataLoader: loader is NULL");
  return l->loader ? pd_io_loader_next(l->loader, batch, max)
                   : pd_dist_shard_dataloader_next(l->shard_loader, batch, max);
}

int64_t pd_dist_data_loader_len(pd_dist_data_loader *l) {
  if (!l) return pd_set_error(PD_ERR_INVALID, "DistributedDataLoader: loader is NULL");
  return l->loader ? pd_io_loader_len(l->loader) : pd_dist_shard_dataloader_len(l->shard_loader);
}

void pd_dist_data_loader_release(pd_dist_data_loader *l) { free(l); }
