/* paddle.distributed.to_static: DistModel and DistributedDataLoader.
 *
 * A DistModel call runs one step of its mode's Program, this rank's part of
 * it, on the Executor (lowered plan, planned arena). The Program of a mode
 * is built at the first call, when the batch gives the feeds' global shapes
 * and placements (again when they change): record -> complete ->
 * partition (dist_program.h). The parameters' local shards are the scope's
 * values (aliases of the layer's DTensors, so updates show in the layer);
 * other persistables (the learning rate, accumulators) come from the
 * startup program, this rank's part of them. The fetches are replicated,
 * so every rank returns the global loss and outputs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../optim/optim_internal.h"
#include "../../static/passes.h"
#include "../comm/group_internal.h"
#include "dist_model_internal.h"
#include "paddlec.h"

struct pd_dist_data_loader {
  pd_io_loader *loader;
  pd_dist_shard_dataloader *shard_loader;
};

/* Passes that are not implemented are refused by name. */
static pd_status check_strategy(const pd_dist_strategy *s) {
  if (!s) return PD_OK;
  pd_status st = pd_dist_strategy_check(s);
  if (st != PD_OK) return st;
  if (s->sharding.enable && s->sharding.stage == 3)
    return pd_set_error(
        PD_ERR_UNIMPLEMENTED,
        "dist.to_static: Strategy.sharding stage 3 is not supported yet (stages 1 and 2 are)");
  const char *pass = s->pipeline.enable ? "pipeline" : s->amp.enable ? "amp" : NULL;
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
  /* an optimizer from shard_optimizer with a stage turns sharding on, on
   * its sharding axis, as Paddle's to_static does; record then minimizes
   * the optimizer it wraps */
  pd_dist_strategy from_opt;
  int opt_axis = -1, opt_degree = 1, opt_stage = pd_ap_shard_optimizer_stage(opt, &opt_axis, &opt_degree);
  if (opt_stage) {
    from_opt = strategy ? *strategy : pd_dist_strategy_default();
    from_opt.sharding = (pd_dist_strategy_sharding){true, opt_stage, opt_degree};
    strategy = &from_opt;
  }
  pd_status st = check_strategy(strategy);
  if (st != PD_OK) return st;
  pd_dist_model *m = calloc(1, sizeof *m);
  pd_dist_data_loader *l = calloc(1, sizeof *l);
  if (!m || !l) {
    free(m);
    free(l);
    return pd_set_error(PD_ERR_MEMORY, "dist.to_static: out of memory");
  }
  /* held, as Paddle's DistModel holds them: the caller may release its own */
  m->layer = pd_layer_retain(layer);
  m->loss = pd_layer_retain(loss);
  m->opt = pd_optimizer_retain(opt);
  m->record_opt = opt_stage ? pd_optim_wrapper_inner(opt) : opt;
  m->sharding_stage = strategy && strategy->sharding.enable ? strategy->sharding.stage : 0;
  m->sharding_degree = strategy ? strategy->sharding.degree : 1;
  m->sharding_axis = opt_stage ? opt_axis : -1;
  m->scope = pd_static_scope();
  m->exe = pd_static_executor(PD_CPU);
  m->gm_k = strategy && strategy->gradient_merge.enable ? strategy->gradient_merge.k_steps : 1;
  m->gm_avg = strategy && strategy->gradient_merge.avg;
  if (strategy) m->dp = strategy->dp_optimization;
  if (m->gm_k > 1 && m->exe) m->exe_acc = pd_static_executor(PD_CPU);
  m->recompute = strategy && strategy->recompute.enable;
  if (m->recompute && (m->n_rc_skip = strategy->recompute.n_no_recompute_segments) > 0) {
    if ((m->rc_skip = malloc(sizeof(int) * (size_t)m->n_rc_skip)))
      memcpy(m->rc_skip, strategy->recompute.no_recompute_segments, sizeof(int) * (size_t)m->n_rc_skip);
    else
      pd_set_error(PD_ERR_MEMORY, "dist.to_static: out of memory");
  }
  /* Strategy.fused_passes: the fusions it lists, the Executor's other passes as they are */
  pd_dist_strategy_fused_passes fp = strategy ? strategy->fused_passes : (pd_dist_strategy_fused_passes){0};
  pd_pass_options po = pd_pass_options_all();
  po.fuse_gemm_epilogue = fp.enable && fp.gemm_epilogue;
  po.fuse_dropout_add = fp.enable && fp.dropout_add;
  pd_executor_set_passes(m->exe, &po);
  pd_executor_set_passes(m->exe_acc, &po);
  pd_named_tensors ps = {0};
  st = m->scope && m->exe && (m->gm_k == 1 || m->exe_acc) && (m->n_rc_skip == 0 || m->rc_skip)
           ? pd_layer_parameters(layer, &ps)
           : pd_last_status();
  for (int i = 0; st == PD_OK && i < ps.n && !m->mesh; i++)
    if (pd_dist_is_dist(ps.tensors[i]))
      m->mesh = pd_dist_process_mesh_retain(pd_dist_process_mesh_of(ps.tensors[i]));
  pd_named_tensors_free(&ps);
  if (st != PD_OK) {
    pd_dist_model_release(m);
    free(l);
    return st;
  }
  m->mode = loss && opt ? PD_DIST_MODE_TRAIN : loss ? PD_DIST_MODE_EVAL : PD_DIST_MODE_PREDICT;
  l->loader = loader;
  l->shard_loader = shard_loader;
  *model = m;
  *dist_loader = l;
  return PD_OK;
}

static void mode_programs_clear(mode_programs *mp) {
  for (int i = 0; i < 2; i++) pd_ap_attr_free(mp->feed_attr[i]);
  pd_ap_program_free(&mp->serial);
  pd_ap_program_free(&mp->dist);
  pd_ap_program_free(&mp->acc);
  memset(mp, 0, sizeof *mp);
}

void pd_dist_model_release(pd_dist_model *m) {
  if (!m) return;
  for (int i = 0; i < 4; i++) mode_programs_clear(&m->progs[i]);
  pd_var_scope_release(m->scope);
  pd_executor_release(m->exe);
  pd_executor_release(m->exe_acc);
  pd_dist_process_mesh_release(m->mesh);
  free(m->rc_skip);
  for (int i = 0; i < m->n_held; i++) pd_tensor_release(m->held[i]);
  free(m->held);
  pd_optimizer_release(m->opt);
  pd_layer_release(m->loss);
  pd_layer_release(m->layer);
  free(m);
}

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

/* The model's mesh: the parameters', else the first distributed input's,
 * else this process alone. */
static pd_dist_process_mesh *model_mesh(pd_dist_model *m, pd_tensor *const *inputs, int n) {
  if (m->mesh) return m->mesh;
  for (int i = 0; i < n; i++)
    if (pd_dist_is_dist(inputs[i]))
      return m->mesh = pd_dist_process_mesh_retain(pd_dist_process_mesh_of(inputs[i]));
  int me = pd_ap_my_rank();
  return m->mesh = pd_dist_process_mesh_new(1, (const int64_t[]){1}, &me, (const char *[]){"x"});
}

/* The global meta and placements of feed t on mesh (a dense t is the
 * global value, replicated). */
static pd_dist_attr *feed_attr(pd_tensor *t, pd_dist_process_mesh *mesh) {
  const pd_dist_attr *a = pd_ap_attr(t);
  if (a) {
    if (pd_dist_process_mesh_equal(a->mesh, mesh)) return pd_ap_attr_copy(a);
    char b1[256], b2[256];
    pd_set_error(PD_ERR_INVALID, "DistModel.__call__: an input is on mesh %s, the model on %s",
                 pd_ap_mesh_str(a->mesh, b1, sizeof b1), pd_ap_mesh_str(mesh, b2, sizeof b2));
    return NULL;
  }
  return pd_ap_attr_replicated(mesh, t->ndim, t->shape);
}

static bool same_attr(const pd_dist_attr *a, const pd_dist_attr *b) {
  return a->ndim == b->ndim && pd_shape_eq(a->ndim, a->shape, b->shape) &&
         pd_ap_placements_equal(a->p, b->p, a->n);
}

/* Whether feed t's attr on mesh (feed_attr's) and dtype are the ones the
 * Programs were built for (want, dt), without making the attr. */
static bool feed_matches(const pd_tensor *t, const pd_dist_process_mesh *mesh, const pd_dist_attr *want,
                         pd_dtype dt) {
  if (t->dtype != dt) return false;
  const pd_dist_attr *a = pd_ap_attr(t);
  if (a) return pd_dist_process_mesh_equal(a->mesh, mesh) && same_attr(a, want);
  return t->ndim == want->ndim && pd_shape_eq(t->ndim, t->shape, want->shape) &&
         pd_ap_placements_equal(pd_ap_replicated, want->p, want->n);
}

/* The tensors of p's fetch Variables (the executor's fetch list). */
static pd_status find_fetches(const pd_ap_program *p, pd_tensor **fetch) {
  for (int k = 0; k < p->n_fetch; k++) {
    pd_variable *v = pd_ir_find_var(p->main->blocks[0], p->fetch[k]);
    if (!v) return pd_set_error(PD_ERR_STATE, "DistModel: no fetch Variable '%s'", p->fetch[k]);
    fetch[k] = v->tensor;
  }
  return PD_OK;
}

/* The scope's value of persistable `name` of the rank's Program: the
 * layer's parameter (its local shard), or this rank's part of the startup
 * program's value (*initial: the startup program's values, run on first
 * need). */
static pd_status init_persistable(pd_dist_model *m, mode_programs *mp, const pd_variable *v,
                                  pd_var_scope **initial) {
  pd_named_tensors ps;
  pd_status st = pd_layer_parameters(m->layer, &ps);
  if (st != PD_OK) return st;
  pd_tensor *value = NULL;
  for (int i = 0; i < ps.n && !value; i++) {
    if (strcmp(pd_ap_param_var_name(ps.tensors[i], ps.names[i]), v->name) == 0 &&
        !(value = pd_ap_local_alias(ps.tensors[i])))
      st = pd_last_status();
  }
  pd_named_tensors_free(&ps);
  /* an optimizer state the eager optimizer holds (set_state_dict loaded
   * it, or state_dict created it) starts from its value */
  if (!value && st == PD_OK) st = pd_ap_model_eager_value(m, v, &value);
  if (!value && st == PD_OK) {
    if (!*initial) {
      *initial = pd_static_scope();
      st = *initial ? pd_executor_run(m->exe, mp->serial.startup, NULL, 0, NULL, 0, NULL, *initial)
                    : pd_last_status();
    }
    pd_tensor *g = st == PD_OK ? pd_var_scope_find_var(*initial, v->name) : NULL;
    if (st == PD_OK && !g)
      st = pd_set_error(PD_ERR_STATE, "DistModel: no initial value of persistable '%s'", v->name);
    const pd_dist_attr *a = pd_ap_var_attr(v);
    if (g && a) {
      pd_dist_attr *rep = pd_ap_attr_replicated(a->mesh, a->ndim, a->shape);
      value = rep ? pd_ap_reshard_local(g, rep, a) : NULL;
      pd_ap_attr_free(rep);
      if (!value) st = pd_last_status();
    } else if (g) {
      value = pd_tensor_retain(g);
    }
  }
  if (st == PD_OK) st = pd_var_scope_set_var(m->scope, v->name, value);
  pd_tensor_release(value);
  return st;
}

/* The sharding axis of Strategy.sharding: shard_optimizer's, else the mesh
 * axis that shards the batch (the first feed's dim 0: data parallelism),
 * else a 1-d mesh's axis; its size must be the sharding degree. */
static pd_status sharding_axis(pd_dist_model *m, const pd_dist_process_mesh *mesh,
                               const pd_dist_attr *input) {
  int axis = m->sharding_axis;
  for (int k = 0; axis < 0 && input && k < input->n; k++)
    if (input->p[k].kind == PD_DIST_SHARD && input->p[k].dim == 0) axis = k;
  if (axis < 0 && mesh->ndim == 1) axis = 0;
  char buf[256];
  if (axis < 0)
    return pd_set_error(
        PD_ERR_INVALID,
        "dist.to_static: Strategy.sharding: no mesh axis of %s shards the batch (dim 0 of the "
        "input), so the sharding axis is unknown",
        pd_ap_mesh_str(mesh, buf, sizeof buf));
  if (mesh->shape[axis] != m->sharding_degree)
    return pd_set_error(
        PD_ERR_INVALID,
        "dist.to_static: Strategy.sharding.degree is %d, but the sharding axis %d ('%s') of mesh "
        "%s has %lld processes",
        m->sharding_degree, axis, mesh->names[axis], pd_ap_mesh_str(mesh, buf, sizeof buf),
        (long long)mesh->shape[axis]);
  m->sharding_axis = axis;
  return PD_OK;
}

/* serial completed (then with the sharding rewrite of stage `sharding` on
 * mesh axis `axis`, if any) and partitioned: this rank's Program *dist,
 * its gradient all_reduces in buckets where dp asks. */
static pd_status complete_partition(const pd_ap_program *serial, pd_ap_program *dist, int sharding, int axis,
                                    const pd_dist_strategy_dp_optimization *dp) {
  pd_ap_program completed;
  pd_ap_completion c;
  pd_status st = pd_ap_complete(serial, &completed, &c);
  if (st != PD_OK) return st;
  if (sharding) st = pd_ap_sharding(&completed, &c, sharding, axis);
  if (st == PD_OK) st = pd_ap_partition(&completed, &c, dist);
  if (st == PD_OK && dp->enable && (st = pd_ap_grad_buckets(dist, dp)) != PD_OK) pd_ap_program_free(dist);
  pd_ap_program_free(&completed);
  pd_ap_completion_free(&c);
  return st;
}

/* The Programs of the current mode for these feeds, built when missing or
 * built for other feed shapes or placements. */
static mode_programs *programs_for(pd_dist_model *m, pd_tensor *const *inputs, int n) {
  mode_programs *mp = &m->progs[m->mode];
  pd_dist_process_mesh *mesh = model_mesh(m, inputs, n);
  if (!mesh) return NULL;
  bool same = mp->built && mp->n_feed == n;
  for (int i = 0; i < n && same; i++)
    same = feed_matches(inputs[i], mesh, mp->feed_attr[i], mp->feed_dtype[i]);
  if (same) return mp;
  pd_dist_attr *fa[2] = {0};
  for (int i = 0; i < n; i++)
    if (!(fa[i] = feed_attr(inputs[i], mesh))) {
      pd_ap_attr_free(fa[0]);
      return NULL;
    }
  mode_programs_clear(mp);
  mp->n_feed = n;
  for (int i = 0; i < n; i++) {
    mp->feed_attr[i] = fa[i];
    mp->feed_dtype[i] = inputs[i]->dtype;
  }
  pd_ap_record_args ra = {.layer = m->layer,
                          .loss = m->loss,
                          .opt = m->record_opt,
                          .mode = m->mode,
                          .mesh = mesh,
                          .n_feed = n,
                          .feed_attr = {fa[0], fa[1]},
                          .feed_dtype = {mp->feed_dtype[0], mp->feed_dtype[1]}};
  pd_ap_program acc_serial = {0};
  bool merge = m->mode == PD_DIST_MODE_TRAIN && m->gm_k > 1;
  int sharding = m->mode == PD_DIST_MODE_TRAIN ? m->sharding_stage : 0;
  /* record runs the layer as a user's code would (its handles in a scope of
   * its own); the later stages keep their tensors out of any scope */
  pd_status st = sharding ? sharding_axis(m, mesh, fa[0]) : PD_OK;
  if (st == PD_OK) st = pd_ap_record(&ra, &mp->serial);
  pd_internal_enter();
  if (st == PD_OK && m->recompute && m->mode == PD_DIST_MODE_TRAIN)
    st = pd_ap_recompute(&mp->serial, m->rc_skip, m->n_rc_skip, NULL);
  if (st == PD_OK && merge) st = pd_ap_gradient_merge(&mp->serial, m->gm_k, m->gm_avg, &acc_serial);
  if (st == PD_OK) st = complete_partition(&mp->serial, &mp->dist, sharding, m->sharding_axis, &m->dp);
  if (st == PD_OK && merge) st = complete_partition(&acc_serial, &mp->acc, 0, 0, &m->dp);
  pd_ap_program_free(&acc_serial);
  if (st == PD_OK) st = find_fetches(&mp->dist, mp->dist_fetch);
  if (st == PD_OK && merge) st = find_fetches(&mp->acc, mp->acc_fetch);
  pd_var_scope *initial = NULL;
  for (int k = 0; k < 2 && st == PD_OK; k++) {
    const pd_static_block *b = k == 0 ? mp->dist.main->blocks[0] : merge ? mp->acc.main->blocks[0] : NULL;
    for (int s = 0; b && s < b->n_vars && st == PD_OK; s++)
      if (b->vars[s]->persistable && !pd_var_scope_find_var(m->scope, b->vars[s]->name))
        st = init_persistable(m, mp, b->vars[s], &initial);
  }
  pd_var_scope_release(initial);
  pd_internal_leave();
  if (st != PD_OK) {
    mode_programs_clear(mp);
    return NULL;
  }
  mp->built = true;
  return mp;
}

/* This rank's part of feed t placed as a. New reference. */
static pd_tensor *local_feed(pd_tensor *t, const pd_dist_attr *a) {
  if (pd_ap_attr(t)) return pd_ap_local_alias(t);
  if (pd_ap_placements_equal(pd_ap_replicated, a->p, a->n)) return pd_tensor_retain(t);
  pd_dist_attr *rep = pd_ap_attr_replicated(a->mesh, a->ndim, a->shape);
  pd_tensor *r = rep ? pd_ap_reshard_local(t, rep, a) : NULL;
  pd_ap_attr_free(rep);
  return r;
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
  for (int i = 0; i < n_inputs; i++)
    if (!inputs[i]) return pd_set_error(PD_ERR_INVALID, "DistModel.__call__: input %d is NULL", i);
  /* after destroy_process_group and a new init, the partitioned Programs'
   * ring ids would name groups of the old environment */
  unsigned long world = pd_dist_world_generation();
  if (m->world && m->world != world)
    return pd_set_error(PD_ERR_STATE,
                        "DistModel.__call__: the model was partitioned in a parallel environment that has "
                        "since been destroyed (generation %lu, now %lu); build it again with dist.to_static",
                        m->world, world);
  int rc = 0, n_fetch = 0;
  mode_programs *mp = programs_for(m, inputs, n_inputs);
  if (!mp) return pd_last_status();
  m->world = world;
  /* gradient_merge: the update on every k-th train call, else accumulation */
  const pd_ap_program *run = &mp->dist;
  pd_tensor **fetch = mp->dist_fetch;
  pd_executor *exe = m->exe;
  if (mp->acc.main && ++m->gm_calls % m->gm_k != 0) {
    run = &mp->acc;
    fetch = mp->acc_fetch;
    exe = m->exe_acc;
  }
  /* the library's own tensors stay out of the caller's scope */
  pd_internal_enter();
  pd_static_feed feeds[2];
  pd_tensor *local[2] = {0}, *got[PD_AP_MAX_FETCH] = {0};
  for (int i = 0; i < n_inputs && rc == 0; i++) {
    local[i] = local_feed(inputs[i], mp->feed_attr[i]);
    feeds[i] = (pd_static_feed){run->feed[i], local[i]};
    if (!local[i]) rc = pd_last_status();
  }
  if (rc == 0) n_fetch = run->n_fetch < max_out ? run->n_fetch : max_out;
  if (rc == 0) rc = pd_executor_run(exe, run->main, feeds, n_inputs, fetch, n_fetch, got, m->scope);
  pd_internal_leave();
  for (int i = 0; i < 2; i++) pd_tensor_release(local[i]);
  for (int k = 0; k < n_fetch; k++) {
    if (rc == 0)
      out[k] = pd_scope_track(got[k]);
    else
      pd_tensor_release(got[k]);
  }
  return rc < 0 ? rc : n_fetch;
}

pd_executor *pd_ap_model_executor(pd_dist_model *m) { return m ? m->exe : NULL; }

pd_program *pd_dist_model_main_program(pd_dist_model *m, pd_dist_model_mode mode, bool serial) {
  if (!m) {
    pd_set_error(PD_ERR_INVALID, "DistModel.dist_main_program: model is NULL");
    return NULL;
  }
  if (mode == PD_DIST_MODE_NONE) mode = m->mode;
  if (mode < PD_DIST_MODE_TRAIN || mode > PD_DIST_MODE_PREDICT || !m->progs[mode].built) {
    pd_set_error(PD_ERR_STATE,
                 "DistModel.%s_main_program: no Program for mode %d yet (it is built at the first call in "
                 "that mode)",
                 serial ? "serial" : "dist", (int)mode);
    return NULL;
  }
  return serial ? m->progs[mode].serial.main : m->progs[mode].dist.main;
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
