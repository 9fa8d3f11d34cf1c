/* paddle.jit: a layer's forward as a static Program (docs/static.md,
 * "jit"). */
#ifndef PADDLEC_JIT_H
#define PADDLEC_JIT_H

#include "paddlec/static.h"

#ifdef __cplusplus
extern "C" {
#endif

/* paddle.jit.to_static(layer, input_spec): records layer's forward once on
 * data Variables described by the specs (-1 dims: any size; a spec without
 * a name is fed as "input_<i>"), and with it the gradients of the outputs
 * with respect to layer's trainable parameters, and returns a layer (a new
 * reference) that runs the forward Program with the Executor when called
 * (pd_layer_call, one tensor per spec, in order). With grad enabled the
 * call is one autograd node whose backward runs the gradient Program, so
 * pd_backward on a loss of its outputs fills the parameters' gradients and
 * an optimizer over them trains the layer; no gradient flows to the
 * inputs. It computes with layer's parameters as they are at each call
 * and holds layer as its sublayer "layer" (its parameters() are layer's).
 * NULL with the recording's error on failure. */
PD_API pd_layer *pd_jit_to_static(pd_layer *layer, const pd_input_spec *input_spec, int n_specs);
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
