/* Shape and indexing ops. Views share storage where Paddle's do. */
#ifndef PADDLEC_MANIPULATION_H
#define PADDLEC_MANIPULATION_H

#include "paddlec/core.h"
#include "paddlec/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One dim may be -1 (inferred), 0 copies the input dim. A view when the
 * strides allow, a copy otherwise. */
PD_API pd_tensor *pd_reshape(pd_tensor *x, int ndim, const int64_t *shape);
/* Broadcasts x to shape (-1 keeps x's dim): a view with zero strides. */
PD_API pd_tensor *pd_expand(pd_tensor *x, int ndim, const int64_t *shape);
/* Permutes dims (a view): out.shape[i] = x.shape[perm[i]]. */
PD_API pd_tensor *pd_transpose(pd_tensor *x, int nperm, const int64_t *perm);
/* x itself when contiguous, else a contiguous copy (differentiable). */
PD_API pd_tensor *pd_contiguous(pd_tensor *x);

/* ---- shape changes (views where the strides allow) -------------------------- */

/* Tensor.reshape_: x itself takes the new shape (as pd_reshape: -1 inferred,
 * 0 copies x's dim). Returns x with one more reference. */
PD_API pd_tensor *pd_reshape_(pd_tensor *x, int ndim, const int64_t *shape);
/* Merges dims start_axis..stop_axis (inclusive; negatives count from the
 * end) into one. A view when those dims merge, a copy otherwise; 0-D x
 * gives shape [1]. */
PD_API pd_tensor *pd_flatten(pd_tensor *x, int64_t start_axis, int64_t stop_axis);
/* Removes the named dims of size 1 (a named dim of another size is kept, as
 * Paddle); naxes = 0 removes every size-1 dim. A view. */
PD_API pd_tensor *pd_squeeze(pd_tensor *x, int naxes, const int64_t *axes);
/* Inplace squeeze; returns x with one more reference. */
PD_API pd_tensor *pd_squeeze_(pd_tensor *x, int naxes, const int64_t *axes);
/* Inserts size-1 dims, one after another in the order given (each axis
 * counted in the rank reached so far, negatives from its end). A view. */
PD_API pd_tensor *pd_unsqueeze(pd_tensor *x, int naxes, const int64_t *axes);
/* Inplace unsqueeze; returns x with one more reference. */
PD_API pd_tensor *pd_unsqueeze_(pd_tensor *x, int naxes, const int64_t *axes);
/* Broadcasts x to y's shape (a view with zero strides). */
PD_API pd_tensor *pd_expand_as(pd_tensor *x, pd_tensor *y);
/* Broadcasts x to shape (-1 keeps x's dim); a view with zero strides. */
PD_API pd_tensor *pd_broadcast_to(pd_tensor *x, int ndim, const int64_t *shape);
/* Repeats x repeat_times[d] (> 0) times along each dim; the shorter of x's
 * shape and repeat_times is padded with leading 1s. */
PD_API pd_tensor *pd_tile(pd_tensor *x, int n, const int64_t *repeat_times);

/* ---- joining and splitting ------------------------------------------------ */

/* Joins n tensors of one dtype along an existing axis (shapes equal except
 * along it; 0-D tensors are refused). */
PD_API pd_tensor *pd_concat(pd_tensor *const *xs, int n, int64_t axis);
/* Joins n tensors of one shape and dtype along a new axis
 * (-(rank+1) <= axis <= rank). */
PD_API pd_tensor *pd_stack(pd_tensor *const *xs, int n, int64_t axis);
/* paddle.split: sections == NULL splits into num_or_nsections equal parts
 * (the axis size must divide evenly); otherwise sections holds
 * num_or_nsections part sizes, one of which may be -1 (inferred). Writes the
 * parts (views) to out (room for cap) and returns their number, at most
 * PD_MAX_OUTPUTS (64), or a negative status. */
PD_API int pd_split(pd_tensor *x, int num_or_nsections, const int64_t *sections, int64_t axis,
                    pd_tensor **out, int cap);
/* paddle.chunk: split into `chunks` equal parts (the size must divide). */
PD_API int pd_chunk(pd_tensor *x, int chunks, int64_t axis, pd_tensor **out, int cap);
/* Removes `axis`, returning its x.shape[axis] (<= 64) slices as views. */
PD_API int pd_unbind(pd_tensor *x, int64_t axis, pd_tensor **out, int cap);

/* ---- slicing ------------------------------------------------------------- */

/* x[starts:ends] along axes (a view). Negative starts/ends count from the
 * end; out-of-range values are clamped to the axis; an empty or inverted
 * range gives a size-0 dim. Repeated axes are refused. */
PD_API pd_tensor *pd_slice(pd_tensor *x, int naxes, const int64_t *axes, const int64_t *starts,
                           const int64_t *ends);
/* x[starts:ends:strides] along axes (a copy). Strides may be negative: the
 * start is then clamped to size-1 and an end of -1 means through element 0
 * (Paddle's rule); a stride of 0 is refused. */
PD_API pd_tensor *pd_strided_slice(pd_tensor *x, int naxes, const int64_t *axes, const int64_t *starts,
                                   const int64_t *ends, const int64_t *strides);
/* Circular shift by shifts[i] along axes[i] (shifts on a repeated axis add);
 * naxes = 0 rolls the flattened tensor by shifts[0] (nshifts must be 1). */
PD_API pd_tensor *pd_roll(pd_tensor *x, int nshifts, const int64_t *shifts, int naxes, const int64_t *axes);
/* Reverses x along the given axes (no repeats). */
PD_API pd_tensor *pd_flip(pd_tensor *x, int naxes, const int64_t *axes);
/* Lower / upper triangle of the last two dims (x rank >= 2): tril keeps
 * column - row <= diagonal, triu keeps column - row >= diagonal. */
PD_API pd_tensor *pd_tril(pd_tensor *x, int64_t diagonal);
PD_API pd_tensor *pd_triu(pd_tensor *x, int64_t diagonal);
/* paddle.assign: a contiguous, differentiable copy of x. */
PD_API pd_tensor *pd_assign(pd_tensor *x);

/* ---- indexing ------------------------------------------------------------ */
/* Index tensors are int32 or int64. Every index is checked; an error names
 * the op, the bad value, its position and the valid range. */

/* Slices of x along axis at index (0-D: the axis is removed; 1-D or [n, 1]:
 * it becomes n long). -size <= index < size. */
PD_API pd_tensor *pd_gather(pd_tensor *x, pd_tensor *index, int64_t axis);
/* index [..., K] (K <= rank of x) addresses x's first K dims; the result has
 * shape index.shape[:-1] + x.shape[K:]. Negative components count from the end. */
PD_API pd_tensor *pd_gather_nd(pd_tensor *x, pd_tensor *index);
/* As gather with a 1-D (or [n, 1]) index. */
PD_API pd_tensor *pd_index_select(pd_tensor *x, pd_tensor *index, int64_t axis);
/* x [b, n], index [b, k] -> [b, k]: out[i, j] = x[i, index[i, j]], 0 <= index < n. */
PD_API pd_tensor *pd_index_sample(pd_tensor *x, pd_tensor *index);
/* paddle.index_add: a copy of x with value's slices added at index along
 * axis (duplicates accumulate); value.shape = x.shape with len(index) at axis. */
PD_API pd_tensor *pd_index_add(pd_tensor *x, pd_tensor *index, int64_t axis, pd_tensor *value);
/* Rows of x (dim 0) at index (0 <= index < x.shape[0]) replaced by updates
 * ([len(index)] + x.shape[1:], or x.shape[1:] for a 0-D index).
 * overwrite=true: rows are written in index order, so for duplicate indices
 * the last one wins. overwrite=false: indexed rows are zeroed, then every
 * update is added (duplicates accumulate). The grad of each updates row is
 * the output grad at its index (duplicates included, as Paddle). */
PD_API pd_tensor *pd_scatter(pd_tensor *x, pd_tensor *index, pd_tensor *updates, bool overwrite);
/* Inplace scatter; returns x with one more reference. */
PD_API pd_tensor *pd_scatter_(pd_tensor *x, pd_tensor *index, pd_tensor *updates, bool overwrite);
/* A copy of x with updates (index.shape[:-1] + x.shape[K:]) added at the
 * slices addressed by index [..., K]; 0 <= components < dim. */
PD_API pd_tensor *pd_scatter_nd_add(pd_tensor *x, pd_tensor *index, pd_tensor *updates);
/* ---- Python indexing: x[...] and x[...] = v ------------------------------
 * An index spec is a list of pd_index items, one per subscript of Paddle's
 * Tensor.__getitem__ / __setitem__:
 *   PD_IX(i)              x[i]      an integer (negative counts from the end)
 *   PD_IX_ALL             x[:]
 *   PD_IX_SLICE(a, b, s)  x[a:b:s]  Python's rules, any step but 0 (negative
 *                                   included); PD_IX_END for an omitted bound
 *   PD_IX_NEWAXIS         x[None]   a new axis of size 1
 *   PD_IX_ELLIPSIS        x[...]    as many full slices as needed (one at most)
 *   PD_IX_TENSOR(t)       x[t]      an int32/int64 tensor of any shape (its
 *                                   shape replaces the axis; negative values
 *                                   count from the end), or a bool mask whose
 *                                   shape equals the dims it covers (they
 *                                   become one axis of the selected elements)
 * So x[..., :n] is {PD_IX_ELLIPSIS, PD_IX_SLICE(PD_IX_END, n, 1)} and
 * x[None, :, None, :] is {PD_IX_NEWAXIS, PD_IX_ALL, PD_IX_NEWAXIS, PD_IX_ALL}.
 * One tensor item per spec (several, combined as NumPy does, are
 * PD_ERR_UNIMPLEMENTED). Built from slice, strided_slice, squeeze, unsqueeze,
 * index_select, nonzero and scatter through the dispatcher, so gradients
 * flow back to x (and to v for pd_setitem_out). Out-of-range integers and
 * index values are errors naming the subscript, the value and the dim. */
#define PD_IX_END INT64_MIN
typedef enum pd_index_kind {
  PD_IX_KIND_INT,
  PD_IX_KIND_SLICE,
  PD_IX_KIND_NEWAXIS,
  PD_IX_KIND_ELLIPSIS,
  PD_IX_KIND_TENSOR
} pd_index_kind;
typedef struct pd_index {
  pd_index_kind kind;
  int64_t i;                 /* INT */
  int64_t start, stop, step; /* SLICE: PD_IX_END for an omitted bound */
  pd_tensor *tensor;         /* TENSOR (borrowed) */
} pd_index;
#define PD_IX(v) ((pd_index){.kind = PD_IX_KIND_INT, .i = (v)})
#define PD_IX_SLICE(a, b, s) ((pd_index){.kind = PD_IX_KIND_SLICE, .start = (a), .stop = (b), .step = (s)})
#define PD_IX_ALL PD_IX_SLICE(PD_IX_END, PD_IX_END, 1)
#define PD_IX_NEWAXIS ((pd_index){.kind = PD_IX_KIND_NEWAXIS})
#define PD_IX_ELLIPSIS ((pd_index){.kind = PD_IX_KIND_ELLIPSIS})
#define PD_IX_TENSOR(t) ((pd_index){.kind = PD_IX_KIND_TENSOR, .tensor = (t)})
/* x[idx]: a new tensor (never a view of x). */
PD_API pd_tensor *pd_getitem(pd_tensor *x, const pd_index *idx, int n);
/* x[idx] = v, in place (x must be contiguous and must not require a
 * gradient; use pd_setitem_out then). v broadcasts to the shape of x[idx]
 * and is converted to x's dtype; with duplicate tensor indices the last
 * write wins. */
PD_API pd_status pd_setitem(pd_tensor *x, const pd_index *idx, int n, pd_tensor *v);
/* The same written into a copy of x, differentiable in x and v. */
PD_API pd_tensor *pd_setitem_out(pd_tensor *x, const pd_index *idx, int n, pd_tensor *v);

/* The elements of x where the bool mask is set (x and mask broadcast
 * together), as a 1-D tensor in row-major order. */
PD_API pd_tensor *pd_masked_select(pd_tensor *x, pd_tensor *mask);
/* Coordinates of the nonzero elements: int64 [n, rank of x], row-major order. */
PD_API pd_tensor *pd_nonzero(pd_tensor *x);
/* nonzero(as_tuple=True): one int64 [n, 1] tensor per dim of x written to out
 * (room for cap); returns their number or a negative status. */
PD_API int pd_nonzero_tuple(pd_tensor *x, pd_tensor **out, int cap);
/* F.one_hot: int labels in [0, num_classes) to float32 x.shape + [num_classes]. */
PD_API pd_tensor *pd_one_hot(pd_tensor *x, int64_t num_classes);

/* padding_idx value meaning "none" for pd_embedding. */
#define PD_NO_PADDING INT64_MIN
/* F.embedding: weight [num_embeddings, dim] rows at ids (0 <= id <
 * num_embeddings) -> ids.shape + [dim]. Ids equal to padding_idx (negative:
 * counted from the end; PD_NO_PADDING: none) read zeros and the row gets no
 * gradient; duplicate ids accumulate their gradients. */
PD_API pd_tensor *pd_embedding(pd_tensor *ids, pd_tensor *weight, int64_t padding_idx);

#ifdef __cplusplus
}
#endif
#endif
