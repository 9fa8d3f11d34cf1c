/* paddle.static.nn control flow: cond and while_loop over static
 * Variables, with C callbacks standing for Paddle's Python functions.
 * docs/static.md ("Control flow") describes how they run and differentiate. */
#ifndef PADDLEC_STATIC_CONTROL_H
#define PADDLEC_STATIC_CONTROL_H

#include "paddlec/static.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A branch of cond: records its ops (called under the Program's guard) and
 * writes up to cap outputs (new references, e.g. what the ops returned) to
 * out; returns how many, or a negative pd_status with the error set. */
typedef int (*pd_static_branch_fn)(void *user, pd_tensor **out, int cap);

/* paddle.static.nn.cond(pred, true_fn, false_fn): the outputs of true_fn
 * where pred (a bool Variable holding one element) is true, else those of
 * false_fn, written to out (new references, up to cap); returns their count
 * or a negative pd_status. Each branch is recorded into a sub-block of its
 * own and a conditional_block op runs the one pred picks when the Program
 * runs: the other one does not run at all, and the gradient flows through
 * the branch taken only. The branches must return the same number of
 * outputs (tensors, not arrays) with the same dtypes and shapes: an error
 * names the output and what differs, as does a pred that is not a bool
 * scalar. Variables of enclosing blocks a branch reads are captured
 * read-only; a branch cannot write them. */
PD_API int pd_static_nn_cond(pd_tensor *pred, pd_static_branch_fn true_fn, pd_static_branch_fn false_fn,
                             void *user, pd_tensor **out, int cap);

/* paddle.static.nn.case(pred_fn_pairs, default) (fluid.layers.Switch with
 * its case / default blocks): the outputs of fns[i] for the first i whose
 * preds[i] (a bool scalar) is true, else those of default_fn; without a
 * default (NULL) the last pair's fn is the default, as in Paddle. Recorded
 * as a chain of conds (cond(preds[0], fns[0], cond(preds[1], ...))), so
 * only the branch picked runs; the branches must agree in count, dtype and
 * shape. Returns the output count or a negative pd_status. */
PD_API int pd_static_nn_case(pd_tensor *const *preds, const pd_static_branch_fn *fns, int n_pairs,
                             pd_static_branch_fn default_fn, void *user, pd_tensor **out, int cap);

/* while_loop's condition: a bool Variable of one element (new reference)
 * computed from the loop variables (borrowed), NULL on error. */
typedef pd_tensor *(*pd_static_loop_cond_fn)(void *user, pd_tensor *const *vars, int n);
/* while_loop's body: writes the n next loop variables (new references) to
 * next; each must keep its loop variable's dtype and shape. */
typedef pd_status (*pd_static_loop_body_fn)(void *user, pd_tensor *const *vars, int n, pd_tensor **next);

/* paddle.static.nn.while_loop(cond, body, loop_vars): records cond and body
 * once into a sub-block of the current Program, on placeholders of the n
 * loop variables, and appends a while op that runs that block until cond
 * is false; the final values are written to out (n new references).
 * Variables of enclosing blocks read by cond or body are captured
 * read-only. append_backward / gradients differentiate through every
 * iteration (while_grad). A cond that does not return a bool scalar, or a
 * body that changes a variable's count, dtype or shape, is an error naming
 * it. */
PD_API pd_status pd_static_nn_while_loop(pd_static_loop_cond_fn cond, pd_static_loop_body_fn body, void *user,
                                         pd_tensor *const *loop_vars, int n, pd_tensor **out);

/* fluid.layers.While(cond) with its block guard: ops recorded between
 * _begin and _end form the loop body, run while cond (a bool Variable of
 * one element) is true. As in Paddle the body updates Variables of the
 * enclosing blocks in place: pd_static_assign_to(value, var) and
 * pd_array_write into an outer array, and it must update cond (else _end
 * is an error: the loop would not end). Recorded as the while op of
 * while_loop: each outer Variable the body writes becomes a loop
 * variable, and after _end the handles of those Variables read their
 * final values; gradients flow through it as through while_loop. Blocks
 * nest; _end closes the innermost one of this thread. */
PD_API pd_status pd_static_while_begin(pd_tensor *cond);
PD_API pd_status pd_static_while_end(void);

/* paddle.assign(x, output) in a Program: writes x into the existing
 * Variable output (same dtype and shape, or both tensor arrays); the
 * handle output reads the new value from then on. In a While block an
 * output of an enclosing block is the loop's state. */
PD_API pd_status pd_static_assign_to(pd_tensor *x, pd_tensor *output);

/* paddle.increment(x, value) (fluid.layers.increment): x + value for an x
 * of one element, as a new tensor of x's dtype, eager or recorded. Paddle
 * writes x in place; here the result is returned instead (in a while_loop
 * body, return it as the next loop variable). */
PD_API pd_tensor *pd_increment(pd_tensor *x, double value);

#ifdef __cplusplus
}
#endif

#endif
