/* Pipeline stages on stage meshes and the micro-batch step (FThenB, 1F1B).
 *
 * A step walks the merged order of pipeline_schedule.c on every rank. The
 * stages are cut apart: the activation entering stage s is a leaf on s's
 * mesh (a reshard of stage s - 1's output made without gradient), so the
 * backward of a micro-batch on one stage stops there and its input's
 * gradient is moved back to stage s - 1, whose backward starts from it.
 *   F(s, i): move the activation (stage 0: micro-batch i of the input) onto
 *            s's mesh, run s's layer (the last stage also the loss, scaled
 *            by 1 / A); ranks outside s run it without gradient, which skips
 *            its ops but gives them the output's dist attr for the moves.
 *   B(s, i): move the gradient of stage s + 1's input back onto s's mesh
 *            (placed as s's output, Partial read as Replicate), then
 *            backward from s's output with it (the last stage: from the
 *            scaled loss). The graph of micro-batch i on stage s is freed.
 * A rank outside both meshes of a move does nothing in it; the moves are
 * the reshards of reshard.c (send/recv between meshes of one shape). */
#include <stdlib.h>
#include <string.h>

#include "../../core/core_internal.h"
#include "../../core/tensor_impl.h"
#include "ap_internal.h"
#include "paddlec/autograd.h"
#include "paddlec/creation.h"
#include "paddlec/manipulation.h"
#include "paddlec/math.h"

typedef struct pipe_stage {
  pd_layer *layer;
  pd_dist_process_mesh *mesh;
  pd_dist_placement in_p[PD_DIST_MAX_MESH_DIMS];
  bool member;
  int live, peak;
} pipe_stage;

struct pd_dist_pipeline {
  pd_dist_process_mesh *global;
  int S, A;
  pd_ap_pipe_mode mode;
  pd_layer *loss_fn;
  pd_dist_placement label_p[PD_DIST_MAX_MESH_DIMS];
  pipe_stage *st;
  pd_ap_pipe_action *order; /* 2 * S * A */
  bool stepped;
};

void pd_dist_pipeline_release(pd_dist_pipeline *p) {
  if (!p) return;
  for (int s = 0; p->st && s < p->S; s++) pd_dist_process_mesh_release(p->st[s].mesh);
  pd_dist_process_mesh_release(p->global);
  free(p->st);
  free(p->order);
  free(p);
}

/* Placements p (NULL: Replicate) checked against mesh m into out. */
static pd_status take_placements(const char *what, pd_dist_process_mesh *m, const pd_dist_placement *p,
                                 pd_dist_placement *out) {
  for (int a = 0; a < PD_DIST_MAX_MESH_DIMS; a++) out[a] = p && a < m->ndim ? p[a] : pd_dist_replicate();
  for (int a = 0; a < m->ndim; a++)
    if (out[a].kind == PD_DIST_SHARD && out[a].dim < 0)
      return pd_set_error(PD_ERR_INVALID, "pipeline: %s: Shard(%d) of a negative dim", what, out[a].dim);
  return PD_OK;
}

/* The stage's mesh inside the global mesh, its DTensor parameters on it. */
static pd_status check_stage(pd_dist_process_mesh *global, const pd_dist_pipeline_stage *sg, int s) {
  char a[256], b[256];
  if (!sg->layer || !sg->mesh)
    return pd_set_error(PD_ERR_INVALID, "pipeline: stage %d has no layer or mesh", s);
  for (int64_t k = 0; k < sg->mesh->size; k++)
    if (!pd_dist_process_mesh_contains(global, sg->mesh->ids[k]))
      return pd_set_error(
          PD_ERR_INVALID,
          "pipeline: stage %d's mesh %s is not inside the global mesh %s (process %d is not in it)", s,
          pd_ap_mesh_str(sg->mesh, a, sizeof a), pd_ap_mesh_str(global, b, sizeof b), sg->mesh->ids[k]);
  pd_named_tensors ps = {0};
  pd_status st = pd_layer_parameters(sg->layer, &ps);
  for (int i = 0; st == PD_OK && i < ps.n; i++) {
    pd_dist_process_mesh *m = pd_dist_process_mesh_of(ps.tensors[i]);
    if (m && !pd_dist_process_mesh_equal(m, sg->mesh))
      st = pd_set_error(PD_ERR_INVALID,
                        "pipeline: stage %d's parameter '%s' is on mesh %s, not the stage's mesh %s", s,
                        ps.names[i], pd_ap_mesh_str(m, a, sizeof a), pd_ap_mesh_str(sg->mesh, b, sizeof b));
  }
  pd_named_tensors_free(&ps);
  return st;
}

pd_dist_pipeline *pd_dist_pipeline_new(pd_dist_process_mesh *global_mesh,
                                       const pd_dist_pipeline_stage *stages, int n_stages,
                                       const pd_dist_pipeline_opts *opts) {
  if (!global_mesh || !stages || !opts || n_stages < 1) {
    pd_set_error(PD_ERR_INVALID, "pipeline: global mesh, stages (%d) and opts must be given", n_stages);
    return NULL;
  }
  const char *mode = opts->schedule_mode ? opts->schedule_mode : "1F1B";
  bool fthenb = strcmp(mode, "FThenB") == 0;
  if (!fthenb && strcmp(mode, "1F1B") != 0) {
    pd_set_error(PD_ERR_INVALID, "pipeline: schedule_mode '%s' is none of 'FThenB', '1F1B'", mode);
    return NULL;
  }
  if (opts->accumulate_steps < 1 || !opts->loss_fn) {
    pd_set_error(PD_ERR_INVALID, "pipeline: accumulate_steps %d (must be >= 1)%s", opts->accumulate_steps,
                 opts->loss_fn ? "" : " and no loss_fn");
    return NULL;
  }
  for (int s = 0; s < n_stages; s++)
    if (check_stage(global_mesh, &stages[s], s) != PD_OK) return NULL;
  pd_dist_pipeline *p = calloc(1, sizeof *p);
  size_t n_act = 2 * (size_t)n_stages * (size_t)opts->accumulate_steps;
  if (!p || !(p->st = calloc((size_t)n_stages, sizeof *p->st)) ||
      !(p->order = malloc(n_act * sizeof *p->order))) {
    pd_dist_pipeline_release(p);
    pd_set_error(PD_ERR_MEMORY, "pipeline: out of memory");
    return NULL;
  }
  p->global = pd_dist_process_mesh_retain(global_mesh);
  p->S = n_stages;
  p->A = opts->accumulate_steps;
  p->mode = fthenb ? PD_AP_PIPE_FTHENB : PD_AP_PIPE_1F1B;
  p->loss_fn = opts->loss_fn;
  int me = pd_ap_my_rank();
  pd_status st = PD_OK;
  for (int s = 0; s < n_stages && st == PD_OK; s++) {
    pipe_stage *g = &p->st[s];
    g->layer = stages[s].layer;
    g->mesh = pd_dist_process_mesh_retain(stages[s].mesh);
    g->member = pd_dist_process_mesh_contains(g->mesh, me);
    char what[48];
    snprintf(what, sizeof what, "stage %d's input_placements", s);
    st = take_placements(what, g->mesh, stages[s].input_placements, g->in_p);
  }
  if (st == PD_OK)
    st = take_placements("label_placements", p->st[p->S - 1].mesh, opts->label_placements, p->label_p);
  if (st == PD_OK) st = pd_ap_pipe_order(p->mode, p->S, p->A, p->order);
  for (int s = 0; s < n_stages && st == PD_OK; s++)
    st = pd_dist_shard_layer(p->st[s].layer, p->st[s].mesh, NULL);
  if (st != PD_OK) {
    pd_dist_pipeline_release(p);
    return NULL;
  }
  return p;
}

int pd_dist_pipeline_peak_live_activations(const pd_dist_pipeline *p, int stage) {
  if (!p || stage < 0 || stage >= p->S || !p->stepped || !p->st[stage].member) return -1;
  return p->st[stage].peak;
}

/* ---- one step -------------------------------------------------------------- */
typedef struct step_state {
  pd_dist_pipeline *p;
  pd_tensor **mb_in, **mb_label; /* A each */
  pd_tensor **in, **out, **gin;  /* S * A each: the stage input (a leaf), its output (last stage: the
                                    scaled loss), the input's gradient placed as the input */
  bool train;                    /* false: eval_batch (forwards only, no gradient) */
  double loss_sum;
  pd_dtype loss_dtype;
  int loss_ndim;
  int64_t loss_shape[PD_MAX_DIMS];
} step_state;

static void drop(pd_tensor **t) {
  pd_tensor_release(*t);
  *t = NULL;
}

/* Rows [i * n / A, (i + 1) * n / A) of t along dim 0, retained. */
static pd_tensor *micro_batch(pd_tensor *t, int64_t rows, int A, int i) {
  int64_t per = rows / A;
  pd_tensor *r =
      pd_slice(t, 1, (const int64_t[]){0}, (const int64_t[]){i * per}, (const int64_t[]){(i + 1) * per});
  return r ? pd_tensor_retain(r) : NULL;
}

/* t placed on mesh m with placements pl, recorded in no graph. */
static pd_tensor *move(pd_tensor *t, pd_dist_process_mesh *m, const pd_dist_placement *pl) {
  pd_no_grad_begin();
  pd_tensor *r = pd_dist_reshard(t, m, pl, m->ndim);
  pd_no_grad_end();
  return r;
}

/* A copy of t's dist attr with Partial read as Replicate (how a gradient of
 * t is placed). */
static pd_dist_attr *grad_attr(const pd_tensor *t, int s) {
  if (!t->dist_attr) {
    pd_set_error(PD_ERR_STATE, "pipeline: stage %d's output is not a DTensor", s);
    return NULL;
  }
  pd_dist_attr *a = pd_ap_attr_copy(pd_ap_attr(t));
  for (int m = 0; a && m < a->n; m++)
    if (a->p[m].kind == PD_DIST_PARTIAL) a->p[m] = pd_dist_replicate();
  return a;
}

static pd_status forward(step_state *ss, int s, int i) {
  pd_dist_pipeline *p = ss->p;
  pipe_stage *g = &p->st[s];
  size_t k = (size_t)s * (size_t)p->A + (size_t)i;
  pd_status st = PD_OK;
  pd_tensor *x = move(s == 0 ? ss->mb_in[i] : ss->out[k - (size_t)p->A], g->mesh, g->in_p);
  if (!x) return pd_last_status();
  if (s > 0) pd_tensor_set_stop_gradient(x, !g->member);
  if (!g->member) pd_no_grad_begin();
  pd_tensor *y = pd_layer_call1(g->layer, x);
  if (y && s == p->S - 1) {
    pd_tensor *label = move(ss->mb_label[i], g->mesh, p->label_p), *loss = NULL;
    int n = label ? pd_layer_call(p->loss_fn, (pd_tensor *[]){y, label}, 2, &loss, 1) : -1;
    y = n == 1 ? pd_scale(loss, 1.0 / p->A, 0.0, true) : NULL;
    if (y && g->member) { /* the loss value, on the last stage's ranks */
      pd_tensor *v = pd_dist_is_dist(y) ? pd_dist_unshard_dtensor(y) : y; /* the scope's */
      if (v)
        ss->loss_sum += pd_tensor_item(v);
      else
        y = NULL;
    }
    if (y) {
      ss->loss_dtype = y->dtype;
      int gn;
      const int64_t *gs = pd_global_shape(y, &gn);
      ss->loss_ndim = gn;
      memcpy(ss->loss_shape, gs, sizeof(int64_t) * (size_t)gn);
    }
  }
  if (!g->member) pd_no_grad_end();
  if (!y) st = pd_last_status();
  if (st == PD_OK) {
    ss->in[k] = pd_tensor_retain(x);
    ss->out[k] = pd_tensor_retain(y);
    if (ss->train && g->member && ++g->live > g->peak) g->peak = g->live;
  }
  return st;
}

/* The gradient of stage s's output moved from stage s + 1 (every rank
 * takes part); *g receives it on s's ranks (a reference of ours, not the
 * scope's), NULL elsewhere. */
static pd_status gradient_from_next(step_state *ss, int s, int i, pd_tensor **g) {
  pd_dist_pipeline *p = ss->p;
  size_t k = (size_t)s * (size_t)p->A + (size_t)i, kn = k + (size_t)p->A;
  pd_dist_attr *from = grad_attr(ss->in[kn], s + 1), *to = grad_attr(ss->out[k], s);
  pd_tensor *local = NULL, *r = NULL;
  pd_internal_enter(); /* the references below are ours */
  if (from && to) {
    local =
        ss->gin[kn] ? pd_ap_local_alias(ss->gin[kn]) : pd_zeros(1, (const int64_t[]){0}, ss->in[kn]->dtype);
    r = local ? pd_ap_reshard_local(local, from, to) : NULL;
  }
  pd_status st = r ? PD_OK : pd_last_status();
  pd_tensor_release(local);
  pd_ap_attr_free(from);
  *g = NULL;
  if (r && p->st[s].member) {
    *g = pd_ap_wrap(r, to);
    to = NULL;
    if (!*g) st = pd_last_status();
  } else {
    pd_tensor_release(r);
  }
  pd_ap_attr_free(to);
  pd_internal_leave();
  drop(&ss->in[kn]);
  drop(&ss->gin[kn]);
  return st;
}

static pd_status backward(step_state *ss, int s, int i) {
  pd_dist_pipeline *p = ss->p;
  pipe_stage *g = &p->st[s];
  size_t k = (size_t)s * (size_t)p->A + (size_t)i;
  pd_status st = PD_OK;
  if (s == p->S - 1) {
    if (g->member) st = pd_backward(ss->out[k], NULL, false);
  } else {
    pd_tensor *grad = NULL;
    st = gradient_from_next(ss, s, i, &grad);
    if (st == PD_OK && g->member) st = pd_backward(ss->out[k], grad, false);
    pd_tensor_release(grad);
  }
  if (st == PD_OK && g->member && s > 0) { /* the input's gradient, placed as the input, for stage s - 1 */
    pd_tensor *gi = pd_tensor_grad(ss->in[k]);
    pd_dist_attr *want = gi ? grad_attr(ss->in[k], s) : NULL;
    pd_tensor *r = want ? move(gi, g->mesh, want->p) : NULL;
    pd_ap_attr_free(want);
    if (r)
      ss->gin[k] = pd_tensor_retain(r);
    else
      st = gi ? pd_last_status()
              : pd_set_error(PD_ERR_STATE, "pipeline: stage %d's input got no gradient (micro-batch %d)", s,
                             i);
  }
  if (s == 0) drop(&ss->in[k]);
  drop(&ss->out[k]);
  if (g->member) g->live--;
  return st;
}

/* The mean loss on every rank: the last stage's first process sends it. */
static pd_tensor *loss_everywhere(step_state *ss) {
  pd_dist_pipeline *p = ss->p;
  pd_tensor *t =
      pd_full(ss->loss_ndim, ss->loss_shape, p->st[p->S - 1].member ? ss->loss_sum : 0.0, PD_FLOAT64);
  if (t && pd_dist_is_initialized() && pd_dist_get_world_size(NULL) > 1 &&
      pd_dist_broadcast(t, p->st[p->S - 1].mesh->ids[0], NULL) != PD_OK)
    return NULL;
  return t ? pd_cast(t, ss->loss_dtype) : NULL;
}

static int64_t batch_rows(const pd_tensor *t) {
  int gn;
  const int64_t *gs = pd_global_shape(t, &gn);
  return gn > 0 ? gs[0] : -1;
}

/* eval_batch: micro-batch by micro-batch through every stage, without
 * gradient; each activation is dropped once the next stage has it. */
static pd_status run_forwards(step_state *ss) {
  pd_dist_pipeline *p = ss->p;
  pd_status st = PD_OK;
  pd_no_grad_begin();
  for (int i = 0; i < p->A && st == PD_OK; i++)
    for (int s = 0; s < p->S && st == PD_OK; s++) {
      pd_scope_begin();
      st = forward(ss, s, i);
      pd_scope_end();
      size_t k = (size_t)s * (size_t)p->A + (size_t)i;
      if (s > 0) {
        drop(&ss->in[k - (size_t)p->A]);
        drop(&ss->out[k - (size_t)p->A]);
      }
      if (s == p->S - 1) {
        drop(&ss->in[k]);
        drop(&ss->out[k]);
      }
    }
  pd_no_grad_end();
  return st;
}

/* One step of train_batch (train) or eval_batch. */
static pd_tensor *run_step(pd_dist_pipeline *p, pd_tensor *input, pd_tensor *label, pd_optimizer *opt,
                           bool train) {
  const char *what = train ? "train_batch" : "eval_batch";
  if (!p || !input || !label) {
    pd_set_error(PD_ERR_INVALID, "pipeline %s: %s is NULL", what,
                 !p       ? "pipeline"
                 : !input ? "input"
                          : "label");
    return NULL;
  }
  int64_t rows = batch_rows(input), lrows = batch_rows(label);
  if (rows < 1 || rows % p->A != 0 || lrows != rows) {
    pd_set_error(PD_ERR_INVALID,
                 "pipeline %s: a batch of %lld samples (label: %lld) does not split into "
                 "accumulate_steps=%d micro-batches",
                 what, (long long)rows, (long long)lrows, p->A);
    return NULL;
  }
  size_t n = (size_t)p->S * (size_t)p->A;
  step_state ss = {.p = p,
                   .train = train,
                   .mb_in = calloc((size_t)p->A, sizeof(pd_tensor *)),
                   .mb_label = calloc((size_t)p->A, sizeof(pd_tensor *)),
                   .in = calloc(n, sizeof(pd_tensor *)),
                   .out = calloc(n, sizeof(pd_tensor *)),
                   .gin = calloc(n, sizeof(pd_tensor *))};
  pd_status st = ss.mb_in && ss.mb_label && ss.in && ss.out && ss.gin
                     ? PD_OK
                     : pd_set_error(PD_ERR_MEMORY, "pipeline %s: out of memory", what);
  /* the groups of every mesh, made on every rank in one order */
  if (st == PD_OK) st = pd_ap_mesh_prepare(p->global);
  for (int s = 0; s < p->S && st == PD_OK; s++) {
    st = pd_ap_mesh_prepare(p->st[s].mesh);
    p->st[s].member = pd_dist_process_mesh_contains(p->st[s].mesh, pd_ap_my_rank());
    if (train) p->st[s].live = p->st[s].peak = 0;
  }
  pd_scope_begin();
  for (int i = 0; i < p->A && st == PD_OK; i++)
    if (!(ss.mb_in[i] = micro_batch(input, rows, p->A, i)) ||
        !(ss.mb_label[i] = micro_batch(label, rows, p->A, i)))
      st = pd_last_status();
  pd_scope_end();
  if (st == PD_OK && !train) st = run_forwards(&ss);
  for (size_t a = 0; train && a < 2 * n && st == PD_OK; a++) {
    pd_ap_pipe_action act = p->order[a];
    pd_scope_begin();
    st = act.backward ? backward(&ss, act.stage, act.micro_batch) : forward(&ss, act.stage, act.micro_batch);
    pd_scope_end();
  }
  if (train) p->stepped = st == PD_OK;
  pd_tensor *loss = NULL;
  if (st == PD_OK) {
    pd_scope_begin();
    loss = loss_everywhere(&ss);
    if (loss) pd_tensor_retain(loss);
    pd_scope_end();
  }
  if (loss && opt) {
    if (pd_optimizer_step(opt) == PD_OK) {
      pd_optimizer_clear_grad(opt, false);
    } else {
      pd_tensor_release(loss);
      loss = NULL;
    }
  }
  for (size_t k = 0; k < n; k++) {
    if (ss.in) drop(&ss.in[k]);
    if (ss.out) drop(&ss.out[k]);
    if (ss.gin) drop(&ss.gin[k]);
  }
  for (int i = 0; i < p->A; i++) {
    if (ss.mb_in) drop(&ss.mb_in[i]);
    if (ss.mb_label) drop(&ss.mb_label[i]);
  }
  free(ss.mb_in), free(ss.mb_label), free(ss.in), free(ss.out), free(ss.gin);
  return loss ? pd_scope_track(loss) : NULL;
}

pd_tensor *pd_dist_pipeline_train_batch(pd_dist_pipeline *p, pd_tensor *input, pd_tensor *label,
                                        pd_optimizer *opt) {
  return run_step(p, input, label, opt, true);
}

pd_tensor *pd_dist_pipeline_eval_batch(pd_dist_pipeline *p, pd_tensor *input, pd_tensor *label) {
  return run_step(p, input, label, NULL, false);
}
