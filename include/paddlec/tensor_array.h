/* Tensor arrays: paddle.tensor.create_array, array_write, array_read,
 * array_length and tensor_array_to_tensor (also fluid.layers' and
 * fluid.LoDTensorArray). docs/static.md ("Tensor arrays") describes them.
 *
 * An array is a pd_tensor handle that only these functions read. Eagerly
 * it stands for Paddle's Python list: its elements are the written tensors
 * themselves (autograd follows them), and array_write changes it in place.
 * Under a program guard it is a Variable of type LOD_TENSOR_ARRAY whose
 * dtype and shape are its elements' (dims the writes disagree on are -1),
 * and the functions record ops; inside a while_loop body or a While block
 * an array is a loop variable like any other. Gradients flow through the
 * recorded ops too (append_backward, gradients). */
#ifndef PADDLEC_TENSOR_ARRAY_H
#define PADDLEC_TENSOR_ARRAY_H

#include "paddlec/core.h"
#include "paddlec/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* paddle.tensor.create_array(dtype, initialized_list): an array holding
 * the n tensors of initialized_list (NULL when n is 0), each of dtype. */
PD_API pd_tensor *pd_create_array(pd_dtype dtype, pd_tensor *const *initialized_list, int n);

/* paddle.tensor.array_write(x, i, array): writes x at index i (one int64
 * or int32 element) and returns the array (a new reference; a new array
 * of x's dtype when array is NULL). Eagerly i may be at most the length
 * (i equal to it appends), as in Paddle; a recorded write past the end
 * grows the array with slots that fail when read. x's dtype must be the
 * array's. Under a guard the array Variable gets a new version (the
 * handle passed, and the one returned, stand for the array after the
 * write). */
PD_API pd_tensor *pd_array_write(pd_tensor *x, pd_tensor *i, pd_tensor *array);

/* paddle.tensor.array_read(array, i): element i (new reference); an index
 * past the end or never written is an error naming it. */
PD_API pd_tensor *pd_array_read(pd_tensor *array, pd_tensor *i);

/* paddle.tensor.array_length(array): the length as an int64 tensor of
 * shape []. */
PD_API pd_tensor *pd_array_length(pd_tensor *array);

/* paddle.tensor_array_to_tensor(input, axis, use_stack): the elements
 * concatenated (use_stack false) or stacked along axis, and in
 * *out_index (NULL: not wanted) an int32 tensor of each element's size
 * along axis (1 each when stacked). An empty array is an error. */
PD_API pd_tensor *pd_tensor_array_to_tensor(pd_tensor *input, int64_t axis, bool use_stack,
                                            pd_tensor **out_index);

/* Whether t is an array (eager, or a Variable of the Program being built). */
PD_API bool pd_tensor_is_array(const pd_tensor *t);

#ifdef __cplusplus
}
#endif

#endif
