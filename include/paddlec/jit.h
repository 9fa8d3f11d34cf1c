/* paddle.jit: a layer's forward as a static Program (docs/static.md,
 * "jit"). */
#ifndef PADDLEC_JIT_H
#define PADDLEC_JIT_H

#include "paddlec/optim.h"
#include "paddlec/static.h"

#ifdef __cplusplus
extern "C" {
#endif

/* paddle.jit.to_static(layer, input_spec): records layer's forward once on
 * data Variables described by the specs (-1 dims: any size; a spec without
 * a name is fed as "input_<i>"), and with it the gradients of the outputs
 * with respect to layer's trainable parameters and the floating inputs
 * (recorded with stop_gradient False, as Paddle's InputSpec), and returns a
 * layer (a new reference) that runs the forward Program with the Executor
 * when called (pd_layer_call, one tensor per spec, in order). With grad
 * enabled the call is one autograd node whose backward runs the gradient
 * Program, so pd_backward on a loss of its outputs sets the parameters'
 * gradients, and those of the inputs whose stop_gradient was False at the
 * call, and an optimizer over the parameters trains the layer. It computes
 * with layer's parameters as they are at each call
 * and holds layer as its sublayer "layer" (its parameters() are layer's).
 * NULL with the recording's error on failure. */
PD_API pd_layer *pd_jit_to_static(pd_layer *layer, const pd_input_spec *input_spec, int n_specs);
/* The training step to_static_train records: the loss of one batch from
 * layer and the step's inputs (a scalar tensor; NULL with an error set on
 * failure). It runs once, on static Variables. */
typedef pd_tensor *(*pd_jit_loss_fn)(pd_layer *layer, pd_tensor *const *inputs, int n_inputs, void *user);
/* paddle.jit.to_static on a training step, the function that computes the
 * loss, calls loss.backward() and optimizer.step(): records loss_fn(layer,
 * data Variables from the specs, user) once, then optimizer.minimize of the
 * loss (the backward and the optimizer's update ops, its learning-rate
 * scheduler and gradient clipping included), and returns a layer (a new
 * reference) whose call (pd_layer_call with one tensor per spec, in order)
 * runs the whole step with the Executor and returns the loss. The update
 * ops write layer's own parameters and optimizer's own accumulators (made
 * now if it has not stepped yet), so state_dict and eager steps before or
 * after continue one training; the learning rate is the optimizer's at
 * this call, or its scheduler's at each call. Parameter gradients stay in
 * the Program (grad is not set), as in Paddle's whole-graph train step.
 * Holds layer as sublayer "layer"; the
 * optimizer need not outlive it. NULL with the recording's error. */
PD_API pd_layer *pd_jit_to_static_train(pd_layer *layer, pd_jit_loss_fn loss_fn, void *user,
                                        pd_optimizer *optimizer, const pd_input_spec *input_spec,
                                        int n_specs);
/* StaticFunction.main_program: the Program a to_static, to_static_train or
 * jit.load layer runs (borrowed; NULL with an error for another layer). */
PD_API pd_program *pd_jit_main_program(pd_layer *fn);
/* paddle.jit.save(layer, path, input_spec): records layer's forward in
 * eval mode (its mode is restored) and writes it as an inference model:
 * <path>.pdmodel and <path>.pdiparams (pd_static_save_inference_model). */
PD_API pd_status pd_jit_save(pd_layer *layer, const char *path, const pd_input_spec *input_spec, int n_specs);
/* paddle.jit.load(path): the model jit.save (or save_inference_model) wrote,
 * as a layer called with the feeds in order and returning the fetches; it
 * needs none of the saved model's code. NULL with an error naming the file
 * and what is wrong. */
PD_API pd_layer *pd_jit_load(const char *path);

#ifdef __cplusplus
}
#endif

#endif
