/* paddle.summary and paddle.flops: a network's table of shapes and
 * parameter counts, and its FLOPs per layer type, from one forward pass. */
#ifndef PADDLEC_SUMMARY_H
#define PADDLEC_SUMMARY_H

#include <stdio.h>

#include "paddlec/core.h"
#include "paddlec/export.h"
#include "paddlec/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- summary (paddle.summary) --------------------------------------------- */
typedef struct pd_summary_info {
  int64_t total_params, trainable_params, non_trainable_params;
  /* the memory estimate Paddle prints (4 bytes per element, whatever the dtype) */
  double input_size_mb, forward_backward_size_mb, params_size_mb, total_size_mb;
} pd_summary_info;

/* paddle.summary(net, input_size, dtypes): runs one forward pass (eval mode,
 * no grad, random inputs of the given shapes; a -1 dim, at most one per
 * shape, becomes 1) with a forward post-hook on every sublayer (not
 * Sequential / LayerList; the net itself only when it has no sublayers) and
 * prints Paddle's table to stdout:
 *   ---------------------------------------------------------------------------
 *    Layer (type)       Input Shape          Output Shape         Param #
 *   ===========================================================================
 *      Linear-1          [[1, 10]]             [1, 10]              110
 *   ...
 *   Total params: 121
 *   Trainable params: 121
 *   Non-trainable params: 0
 *   ---------------------------------------------------------------------------
 *   Input size (MB): 0.00
 *   Forward/backward pass size (MB): 0.00
 *   Params size (MB): 0.00
 *   Estimated Total Size (MB): 0.00
 *   ---------------------------------------------------------------------------
 * Rows are named "<type>-<n>" with n from the layer's full_name ("linear_0"
 * gives Linear-1). dtypes may be NULL (float32). `info` (may be NULL) gets
 * the counts. The training flag is restored afterwards. */
PD_API pd_status pd_summary(pd_layer *net, int n_inputs, const int *ndims, const int64_t *const *shapes,
                            const pd_dtype *dtypes, pd_summary_info *info);
/* The same table as a malloc'ed string (the caller frees), printing nothing. */
PD_API char *pd_summary_string(pd_layer *net, int n_inputs, const int *ndims, const int64_t *const *shapes,
                               const pd_dtype *dtypes, pd_summary_info *info);
/* paddle.summary(net, input=...): the given tensors are the inputs. */
PD_API char *pd_summary_string_inputs(pd_layer *net, pd_tensor *const *inputs, int n_inputs,
                                      pd_summary_info *info);

/* ---- flops (paddle.flops) ------------------------------------------------ */
/* A counter for one layer call: returns the FLOPs of that call (>= 0) or a
 * negative status. */
typedef int64_t (*pd_flops_count_fn)(pd_layer *layer, pd_tensor *const *in, int n_in, pd_tensor *const *out,
                                     int n_out, void *user);
/* custom_ops: a counter for the layers whose type name is `type_name`. */
typedef struct pd_flops_custom {
  const char *type_name;
  pd_flops_count_fn fn;
  void *user;
} pd_flops_custom;

typedef struct pd_flops_opts {
  bool print_detail;                 /* print the per-layer table */
  const pd_flops_custom *custom_ops; /* checked before the built-in counters */
  int n_custom_ops;
  FILE *out;  /* where the report goes; NULL: stdout */
  bool quiet; /* print nothing */
} pd_flops_opts;

typedef struct pd_flops_row {
  char *name; /* full_name(): "linear_0" */
  int in_ndim, out_ndim;
  int64_t in_shape[PD_MAX_DIMS], out_shape[PD_MAX_DIMS]; /* first input / output */
  int64_t params, flops;
} pd_flops_row;

typedef struct pd_flops_result {
  int64_t total_flops, total_params;
  int n_rows; /* one per leaf layer that ran, in named_sublayers order */
  pd_flops_row *rows;
  int n_unknown; /* leaf layer types with no counter (counted as 0) */
  char **unknown_types;
} pd_flops_result;
PD_API void pd_flops_result_free(pd_flops_result *r);

/* paddle.flops(net, input_size, print_detail=...): runs one forward pass (eval
 * mode, no grad) on a float32 randn input of the given shape with a forward
 * post-hook on every leaf layer (one with no sublayers), counting per layer
 * type as Paddle's dynamic counter does:
 *   Linear                   in_features * numel(output)
 *   Conv1D/2D/3D(Transpose)  numel(output) * (x.shape[1] / groups * prod(kernel) + has_bias)
 *   BatchNorm, BatchNorm2D   2 * numel(input)
 *   LeakyReLU                numel(input)
 *   AvgPool1D/2D/3D          numel(output)
 *   AdaptiveAvgPool1D/2D/3D  (prod(in_spatial / out_spatial) + 1) * numel(output)
 *   ReLU, ReLU6, Dropout     0
 * Other types count 0 and are reported. Prints what Paddle prints (the
 * counted/unknown type lines, the table when print_detail, and
 * "Total Flops: F     Total Params: P"). Returns the total FLOPs or a
 * negative status. Unlike Paddle, a net that is itself a leaf layer is
 * counted (Paddle sums sublayers only and reports 0 for it). */
PD_API int64_t pd_flops(pd_layer *net, int ndim, const int64_t *input_shape, bool print_detail);
/* pd_flops with options (NULL: defaults) and the per-layer result (may be
 * NULL; free it with pd_flops_result_free). */
PD_API int64_t pd_flops_with_opts(pd_layer *net, int ndim, const int64_t *input_shape,
                                  const pd_flops_opts *opts, pd_flops_result *result);

/* Deprecated names, kept for one release (docs/architecture.md, "Names"). */
#define pd_flops_ex pd_flops_with_opts

#ifdef __cplusplus
}
#endif
#endif
