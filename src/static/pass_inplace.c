/* In-place reuse: which input's bytes an op's output may take. The arena
 * planner (memory_plan.c) does the rest: it places the output over that
 * input only when the input dies at this op, has the output's size and is
 * a value of the arena itself (not a feed, a parameter or a view; see
 * arena_build in executor.c).
 *
 * Safe for elementwise ops: their kernels read element i of every input
 * before they write element i of the output, and a fused elementwise chain
 * writes its output only in its last step, after reading the block's
 * inputs. The input must have the output's shape and element size (no
 * broadcasting: a broadcast input is read again after its bytes are
 * overwritten). Other ops name the input their kernel may write over in
 * their registry row (writes_over, op_registry.h): the softmax cross
 * entropy's gradient its logits, which on the decoder of bench_static die
 * there ([512, 1000], 2 MB). */
#include "passes.h"

int pd_pass_inplace_input(const pd_static_block *b, const pd_operator *op, const int *in_slots,
                          const int *out_slots) {
  if (op->n_out != 1 || op->grad_of >= 0) return -1;
  if (op->fused ? !op->fused->elementwise : op->op_id < 0) return -1;
  const pd_op_def *def = op->fused ? NULL : pd_op_table[op->op_id];
  if (def && (def->flags & (PD_OPF_VIEW | PD_OPF_INPLACE))) return -1;
  int only = -1; /* the one input a non-elementwise op may write over; -1: any (elementwise) */
  if (def && !def->ew_fn) {
    only = def->writes_over ? def->writes_over(&op->attrs) : -1;
    if (only < 0) return -1;
  }
  int o = out_slots[0];
  if (o < 0) return -1;
  const pd_variable *out = b->vars[o];
  for (int i = 0; i < op->n_in; i++) {
    int s = in_slots[i];
    if (s < 0 || (only >= 0 && i != only)) continue;
    const pd_variable *v = b->vars[s];
    if (pd_pass_same_shape(v, out) && pd_dtype_size(v->dtype) == pd_dtype_size(out->dtype)) return i;
  }
  return -1;
}
