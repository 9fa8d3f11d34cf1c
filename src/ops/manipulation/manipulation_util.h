/* Helpers shared by the shape and indexing ops (op_manip_*.c, op_index_*.c). */
#ifndef PADDLEC_OPS_MANIP_UTIL_H
#define PADDLEC_OPS_MANIP_UTIL_H

#include "../../kernels/cpu/index.h"
#include "../op_registry.h"

/* Resolves -1 / 0 entries of a reshape target against x (core/view.c). */
pd_status pd_resolve_shape(const char *op, const pd_tensor *x, int n, const int64_t *want, int64_t *shape);

/* Checks that `idx` (named `what` in messages) is an int32/int64 tensor. */
pd_status pd_mu_check_index_dtype(const char *op, const char *what, const pd_tensor *idx);

/* Reads an int32/int64 index tensor (any layout) into a malloc'ed int64
 * array without range checks. The caller frees *out. */
pd_status pd_mu_read_raw(const char *op, const char *what, const pd_tensor *idx, int64_t **out);

/* Reads an int32/int64 index tensor (any layout) into a malloc'ed int64
 * array, checking every value against an axis of size `size`:
 * allow_neg: -size <= v < size (negatives are normalised), else 0 <= v < size.
 * A bad value gives "<op>: <what>[pos] = v is out of range for axis <axis>
 * of size <size> (valid range [lo, hi))". The caller frees *out. */
pd_status pd_mu_read_indices(const char *op, const char *what, const pd_tensor *idx, int axis, int64_t size,
                             bool allow_neg, int64_t **out);

/* Formats the position of flat element `flat` of a tensor of `shape` as
 * "[i]" or "[i, j]" into buf. */
char *pd_mu_pos_str(int ndim, const int64_t *shape, int64_t flat, char *buf, size_t cap);

/* Reports an out-of-range index (see pd_mu_read_indices). */
pd_status pd_mu_index_error(const char *op, const char *what, int ndim, const int64_t *shape, int64_t flat,
                            int64_t value, int axis, int64_t size, bool allow_neg);

/* Normalises and checks a list of axes (no repeats) into ax; fills mask. */
pd_status pd_mu_axes(const char *op, int n, const int64_t *axes, int ndim, int *ax, bool *mask);

/* Copies a list into an attrs slot; fails when longer than PD_MAX_DIMS. */
pd_status pd_mu_set_list(const char *op, const char *what, pd_attrs *a, int slot, int n, const int64_t *v);

/* Makes x take r's autograd identity and, when take_layout, its geometry
 * and storage (and r's dist attr, where r is a DTensor: its global shape
 * and placements): the inplace ops that are computed out of place. r is
 * consumed. Bumps x's storage version. */
void pd_mu_become(pd_tensor *x, pd_tensor *r, bool take_layout);

/* Runs an inplace view op (squeeze_, reshape_, ...): without recording the
 * inplace row runs on a dense x; when autograd records, or x is a DTensor,
 * the out-of-place view op runs and x takes over its result. Returns x with
 * one more reference. */
pd_tensor *pd_mu_inplace_view(pd_op_id view_id, pd_op_id inplace_id, pd_tensor *x, const pd_attrs *a);

/* The recorded path of inplace op inplace_id computed out of place: op
 * `id` runs on a copy of x = in[0] (so that nothing its grad node saves
 * shares x's storage) and in[1..n_in), its result is placed as x (for a
 * DTensor, by the hook auto_parallel installs: pd_dispatch_get_dist_place_as),
 * written back into x, and x takes over its autograd identity. Refuses a
 * leaf x that needs a gradient and an x whose elements overlap. Returns x
 * with one more reference, or NULL with the error set. */
pd_tensor *pd_mu_inplace_on_copy(pd_op_id inplace_id, pd_op_id id, pd_tensor *const *in, int n_in,
                                 const pd_attrs *a);

/* Whether an op with these inputs would be recorded by autograd now. */
bool pd_mu_would_record(pd_tensor *const *in, int n);

/* The error Paddle gives for an inplace op on a leaf that needs a grad. */
pd_status pd_mu_leaf_inplace_error(const char *op);

/* Copy the whole of src (any layout) into contiguous dst of the same shape. */
void pd_mu_copy_into(pd_tensor *dst, const pd_tensor *src);

#endif
