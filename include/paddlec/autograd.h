/* Eager autograd: backward, paddle.grad, no_grad, hooks, custom functions. */
#ifndef PADDLEC_AUTOGRAD_H
#define PADDLEC_AUTOGRAD_H

#include "paddlec/core.h"
#include "paddlec/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* loss.backward(grad_tensor, retain_graph). grad may be NULL (ones; loss
 * must then hold one element). Leaf grads accumulate into pd_tensor_grad. */
PD_API pd_status pd_backward(pd_tensor *loss, pd_tensor *grad, bool retain_graph);

typedef struct pd_grad_opts {
  bool retain_graph; /* default: same as create_graph */
  bool create_graph; /* record the backward pass, for higher-order grads */
  bool allow_unused; /* an input the outputs do not depend on gets NULL */
} pd_grad_opts;

/* paddle.grad(outputs, inputs, grad_outputs): writes n_in new references to
 * grads_out (NULL for unused inputs when allow_unused). grad_outputs may be
 * NULL (ones for every output) or hold NULL entries. Leaf .grad untouched. */
PD_API pd_status pd_grad(pd_tensor *const *outputs, int n_out, pd_tensor *const *inputs, int n_in,
                         pd_tensor *const *grad_outputs, const pd_grad_opts *opts, pd_tensor **grads_out);

/* Grad mode: pd_set_grad_enabled returns the previous value.
 * pd_no_grad_begin/end nest (paddle.no_grad). */
PD_API bool pd_set_grad_enabled(bool enabled);
PD_API bool pd_is_grad_enabled(void);
PD_API void pd_no_grad_begin(void);
PD_API void pd_no_grad_end(void);

/* A new tensor sharing t's data, cut from the graph (stop_gradient=True). */
PD_API pd_tensor *pd_detach(pd_tensor *t);

/* Tensor.register_hook: fn(grad, user) returns a replacement grad (a new
 * reference) or NULL to keep it. Returns a hook id (>0) or a negative status. */
typedef pd_tensor *(*pd_tensor_hook_fn)(pd_tensor *grad, void *user);
PD_API int pd_tensor_register_hook(pd_tensor *t, pd_tensor_hook_fn fn, void *user);
PD_API pd_status pd_tensor_remove_hook(pd_tensor *t, int id);
/* A hook on a leaf that runs after its .grad has been accumulated. */
typedef void (*pd_post_accumulate_hook_fn)(pd_tensor *leaf, void *user);
PD_API int pd_tensor_register_post_accumulate_hook(pd_tensor *t, pd_post_accumulate_hook_fn fn, void *user);

/* Engine callbacks (PyTorch's Variable._execution_engine.queue_callback):
 * called from inside a running backward (a hook), queues fn to run once
 * when the outermost pd_backward / pd_grad in progress on this thread ends,
 * in queue order, after every node ran. fn receives the backward's status
 * (it runs on failure too, so that it can clean up) and returns its own;
 * the first failure of a callback becomes the result of a backward that
 * had succeeded. PD_ERR_STATE when no backward is running. */
typedef pd_status (*pd_autograd_callback_fn)(pd_status backward_status, void *user);
PD_API pd_status pd_autograd_queue_callback(pd_autograd_callback_fn fn, void *user);

/* ---- custom functions (paddle.autograd.PyLayer) ------------------------ */
typedef struct pd_pylayer_ctx pd_pylayer_ctx;
/* forward: reads inputs, writes n_out outputs (new references). Runs without
 * recording. backward: gets one grad per output, writes one grad per input
 * (new reference or NULL). */
typedef pd_status (*pd_pylayer_forward_fn)(pd_pylayer_ctx *ctx, pd_tensor *const *inputs, int n_in,
                                           pd_tensor **outputs, int n_out);
typedef pd_status (*pd_pylayer_backward_fn)(pd_pylayer_ctx *ctx, pd_tensor *const *grad_outputs, int n_out,
                                            pd_tensor **grad_inputs, int n_in);
typedef struct pd_pylayer {
  const char *name;
  pd_pylayer_forward_fn forward;
  pd_pylayer_backward_fn backward;
} pd_pylayer;

/* PyLayer.apply: runs forward and, when an input needs a grad, records a
 * node whose backward is the user's. */
PD_API pd_status pd_pylayer_apply(const pd_pylayer *fn, pd_tensor *const *inputs, int n_in,
                                  pd_tensor **outputs, int n_out);
/* ctx.save_for_backward / ctx.saved_tensor (borrowed) / user data. */
PD_API pd_status pd_pylayer_save_for_backward(pd_pylayer_ctx *ctx, pd_tensor *const *ts, int n);
PD_API pd_tensor *pd_pylayer_saved_tensor(pd_pylayer_ctx *ctx, int i);
PD_API int pd_pylayer_num_saved(pd_pylayer_ctx *ctx);
PD_API void pd_pylayer_set_data(pd_pylayer_ctx *ctx, void *data, void (*free_fn)(void *));
PD_API void *pd_pylayer_data(pd_pylayer_ctx *ctx);

#ifdef __cplusplus
}
#endif
#endif
