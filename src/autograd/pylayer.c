/* Custom functions with user forward and backward (paddle.autograd.PyLayer). */
#include <stdlib.h>

#include "node.h"

pd_status pd_pylayer_save_for_backward(pd_pylayer_ctx *ctx, pd_tensor *const *ts, int n) {
  if (!ctx || (n > 0 && !ts)) return pd_set_error(PD_ERR_INVALID, "save_for_backward: NULL argument");
  pd_tensor **s = realloc(ctx->saved, (size_t)(ctx->n_saved + n) * sizeof *s);
  if (!s && ctx->n_saved + n > 0) return pd_set_error(PD_ERR_MEMORY, "save_for_backward: out of memory");
  ctx->saved = s;
  for (int i = 0; i < n; i++) ctx->saved[ctx->n_saved++] = pd_tensor_retain(ts[i]);
  return PD_OK;
}

pd_tensor *pd_pylayer_saved_tensor(pd_pylayer_ctx *ctx, int i) {
  if (!ctx || i < 0 || i >= ctx->n_saved) {
    pd_set_error(PD_ERR_INDEX, "saved_tensor: index %d out of range (%d saved)", i, ctx ? ctx->n_saved : 0);
    return NULL;
  }
  return ctx->saved[i];
}

int pd_pylayer_num_saved(pd_pylayer_ctx *ctx) { return ctx ? ctx->n_saved : 0; }

void pd_pylayer_set_data(pd_pylayer_ctx *ctx, void *data, void (*free_fn)(void *)) {
  if (!ctx) return;
  if (ctx->data_free) ctx->data_free(ctx->data);
  ctx->data = data;
  ctx->data_free = free_fn;
}

void *pd_pylayer_data(pd_pylayer_ctx *ctx) { return ctx ? ctx->data : NULL; }

static void ctx_free(pd_pylayer_ctx *ctx) {
  for (int i = 0; i < ctx->n_saved; i++) pd_tensor_release(ctx->saved[i]);
  free(ctx->saved);
  if (ctx->data_free) ctx->data_free(ctx->data);
  free(ctx);
}

pd_status pd_pylayer_apply(const pd_pylayer *fn, pd_tensor *const *inputs, int n_in, pd_tensor **outputs,
                           int n_out) {
  if (!fn || !fn->forward || !fn->backward || !outputs || n_out <= 0 || n_in < 0 || (n_in && !inputs))
    return pd_set_error(PD_ERR_INVALID, "PyLayer.apply: needs forward, backward, inputs and outputs");
  for (int i = 0; i < n_in; i++)
    if (!inputs[i])
      return pd_last_status()
                 ? pd_last_status()
                 : pd_set_error(PD_ERR_INVALID, "%s: input %d is NULL", fn->name ? fn->name : "PyLayer", i);
  pd_pylayer_ctx *ctx = calloc(1, sizeof *ctx);
  if (!ctx) return pd_set_error(PD_ERR_MEMORY, "PyLayer.apply: out of memory");
  for (int k = 0; k < n_out; k++) outputs[k] = NULL;
  pd_internal_enter();
  bool prev = pd_grad_mode_set(false);
  pd_status st = fn->forward(ctx, inputs, n_in, outputs, n_out);
  pd_grad_mode_set(prev);
  for (int k = 0; st == PD_OK && k < n_out; k++)
    if (!outputs[k])
      st =
          pd_set_error(PD_ERR_INVALID, "%s: forward left output %d NULL", fn->name ? fn->name : "PyLayer", k);
  bool record = false;
  for (int i = 0; i < n_in; i++) record |= !inputs[i]->stop_gradient;
  record = record && prev && st == PD_OK;
  if (record) {
    pd_node *node = pd_node_alloc(n_in, n_out);
    if (!node) {
      st = pd_last_status();
    } else {
      node->op = -1;
      node->custom = fn;
      node->ctx = ctx;
      ctx = NULL;
      pd_node_connect_inputs(node, inputs, n_in);
      pd_node_attach_outputs(node, outputs, n_out, 0);
    }
  }
  if (ctx) ctx_free(ctx);
  if (st != PD_OK)
    for (int k = 0; k < n_out; k++) {
      pd_tensor_release(outputs[k]);
      outputs[k] = NULL;
    }
  pd_internal_leave();
  if (st == PD_OK)
    for (int k = 0; k < n_out; k++) pd_scope_track(outputs[k]);
  return st;
}
