/* dist.to_static, stage 1 (record): the layer's forward, and per mode the
 * loss, the backward and the optimizer update (minimize), recorded under
 * program_guard into a serial Program of global shapes.
 *
 * A distributed parameter is a DTensor whose own shape is its local
 * shard's, so before recording each parameter gets a Variable of its global
 * shape carrying its dist attr, and the DTensor becomes a second handle of
 * it. While the layer runs, the dispatcher's DTensor step is replaced by one
 * that hands each op those Variables instead (so infer_meta sees global
 * shapes) and lets the recorder record it. The data Variables (input0,
 * label0) get the loader's placements. */
#include <stdio.h>
#include <string.h>

#include "dist_program.h"
#include "paddlec/layers.h"

static void *copy_attr(const void *a) { return pd_ap_attr_copy(a); }

/* How the Program IR frees and copies a Variable's dist attr. */
static const pd_var_attr_ops k_var_attr_ops = {pd_ap_attr_free, copy_attr};

void pd_ap_var_set_attr(pd_variable *v, pd_dist_attr *a) {
  if (v->dist_attr && v->dist_attr_ops) v->dist_attr_ops->free(v->dist_attr);
  v->dist_attr = a;
  v->dist_attr_ops = a ? &k_var_attr_ops : NULL;
}

void pd_ap_program_free(pd_ap_program *p) {
  if (!p) return;
  pd_program_release(p->main);
  pd_program_release(p->startup);
  pd_dist_process_mesh_release(p->mesh);
  memset(p, 0, sizeof *p);
}

/* An op on DTensor parameters, while recording: recorded on their
 * Variables. */
static int record_hook(void *ctx, pd_op_id id, pd_tensor *const *in, int n_in, const pd_attrs *a,
                       pd_tensor **out, int *n_out, pd_status *st) {
  pd_program *p = ctx;
  const pd_op_def *def = pd_op_table[id];
  pd_tensor *use[PD_MAX_OUTPUTS];
  if (n_in > PD_MAX_OUTPUTS) {
    *st = pd_set_error(PD_ERR_INVALID, "%s: too many inputs (%d)", def->name, n_in);
    return 1;
  }
  for (int i = 0; i < n_in; i++) {
    use[i] = in[i];
    if (!in[i]->dist_attr) continue;
    pd_variable *v = pd_ir_var_of(p, in[i]);
    if (!v) {
      char buf[600];
      *st = pd_set_error(PD_ERR_INVALID,
                         "dist.to_static: %s: input %d is a DTensor (%s) that is no parameter of the layer; "
                         "only parameters and the loader's data may be distributed",
                         def->name, i, pd_ap_attr_str(pd_ap_attr(in[i]), buf, sizeof buf));
      return 1;
    }
    use[i] = v->tensor;
  }
  void *hctx = NULL;
  pd_dist_fn self = pd_dispatch_suspend_dist(&hctx);
  *st = pd_dispatch(id, use, n_in, a, out, n_out);
  pd_dispatch_resume_dist(self, hctx);
  return 1;
}

/* The layer's parameters as Variables of their global shapes. */
static pd_status add_params(pd_program *main, pd_layer *layer, pd_dist_process_mesh *mesh) {
  pd_named_tensors ps;
  pd_status st = pd_layer_parameters(layer, &ps);
  if (st != PD_OK) return st;
  pd_static_block *gb = main->blocks[0];
  for (int i = 0; i < ps.n && st == PD_OK; i++) {
    pd_tensor *t = ps.tensors[i];
    const pd_dist_attr *ta = pd_ap_attr(t);
    if (ta && !pd_dist_process_mesh_equal(ta->mesh, mesh)) {
      char b1[256], b2[256];
      st = pd_set_error(PD_ERR_UNIMPLEMENTED,
                        "dist.to_static: parameter '%s' is on mesh %s, the model on %s; one mesh per model "
                        "for now",
                        ps.names[i], pd_ap_mesh_str(ta->mesh, b1, sizeof b1),
                        pd_ap_mesh_str(mesh, b2, sizeof b2));
      break;
    }
    const char *name = pd_ap_param_var_name(t, ps.names[i]);
    int ndim = ta ? ta->ndim : t->ndim;
    const int64_t *shape = ta ? ta->shape : t->shape;
    pd_variable *v = pd_ir_add_var(gb, name, t->dtype, ndim, shape, NULL);
    pd_dist_attr *a = v ? (ta ? pd_ap_attr_copy(ta) : pd_ap_attr_replicated(mesh, ndim, shape)) : NULL;
    if (!a) {
      st = pd_last_status();
      break;
    }
    v->persistable = v->is_parameter = true;
    /* the recorder reads the flag off the handle an op is given */
    v->stop_gradient = v->tensor->stop_gradient = t->stop_gradient;
    pd_ap_var_set_attr(v, a);
    st = pd_ir_alias_handle(main, t, v);
  }
  pd_named_tensors_free(&ps);
  return st;
}

/* The data Variable `name` with attr fa (global shape, placements). */
static pd_tensor *add_data(pd_program *main, const char *name, const pd_dist_attr *fa, pd_dtype dt) {
  pd_tensor *x = pd_static_data(name, fa->ndim, fa->shape, dt);
  pd_variable *v = x ? pd_ir_var_of(main, x) : NULL;
  pd_dist_attr *a = v ? pd_ap_attr_copy(fa) : NULL;
  if (!a) return NULL;
  pd_ap_var_set_attr(v, a);
  return x;
}

static pd_status record_body(const pd_ap_record_args *a, pd_ap_program *out) {
  static const char *const feed_names[2] = {"input0", "label0"};
  pd_tensor *feeds[2] = {0};
  for (int i = 0; i < a->n_feed; i++) {
    snprintf(out->feed[i], PD_AP_NAME_LEN, "%s", feed_names[i]);
    if (!(feeds[i] = add_data(out->main, feed_names[i], a->feed_attr[i], a->feed_dtype[i])))
      return pd_last_status();
  }
  out->n_feed = a->n_feed;
  pd_tensor *outs[PD_AP_MAX_FETCH];
  int n = pd_layer_call(a->layer, feeds, 1, outs, PD_AP_MAX_FETCH);
  if (n < 1) return n < 0 ? n : pd_set_error(PD_ERR_STATE, "dist.to_static: the layer returned no output");
  pd_tensor *fetch[PD_AP_MAX_FETCH];
  int n_fetch = n;
  for (int k = 0; k < n; k++) fetch[k] = outs[k];
  if (a->mode != PD_DIST_MODE_PREDICT) {
    pd_tensor *loss = NULL;
    int nl = pd_layer_call(a->loss, (pd_tensor *[]){outs[0], feeds[1]}, 2, &loss, 1);
    if (nl < 1) return nl < 0 ? nl : pd_set_error(PD_ERR_STATE, "dist.to_static: the loss returned nothing");
    fetch[0] = loss;
    n_fetch = 1;
    if (a->mode == PD_DIST_MODE_TRAIN) {
      pd_status st = pd_optimizer_minimize(a->opt, loss);
      if (st != PD_OK) return st;
    }
  }
  for (int k = 0; k < n_fetch; k++) {
    pd_variable *v = pd_ir_var_of(out->main, fetch[k]);
    if (!v) return pd_set_error(PD_ERR_STATE, "dist.to_static: output %d is no Variable of the Program", k);
    snprintf(out->fetch[k], PD_AP_NAME_LEN, "%s", v->name);
  }
  out->n_fetch = n_fetch;
  return PD_OK;
}

pd_status pd_ap_record(const pd_ap_record_args *a, pd_ap_program *out) {
  memset(out, 0, sizeof *out);
  out->main = pd_static_program();
  out->startup = pd_static_program();
  out->mesh = pd_dist_process_mesh_retain(a->mesh);
  if (!out->main || !out->startup) {
    pd_ap_program_free(out);
    return pd_last_status();
  }
  pd_status st = add_params(out->main, a->layer, a->mesh);
  if (st == PD_OK) st = pd_static_program_guard_begin(out->main, out->startup);
  if (st != PD_OK) {
    pd_ap_program_free(out);
    return st;
  }
  void *prev_ctx = NULL;
  pd_dist_fn prev = pd_dispatch_get_dist(&prev_ctx);
  pd_dispatch_set_dist(record_hook, out->main);
  pd_scope_begin();
  pd_ap_recompute_marking(true);
  st = record_body(a, out);
  pd_ap_recompute_marking(false);
  pd_scope_end();
  pd_dispatch_set_dist(prev, prev_ctx);
  pd_static_program_guard_end();
  if (st != PD_OK) pd_ap_program_free(out);
  return st;
}
