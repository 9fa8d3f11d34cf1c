/* What the control-flow recorders (control_flow.c, while_block.c,
 * tensor_array.c) share. */
#ifndef PADDLEC_CONTROL_INTERNAL_H
#define PADDLEC_CONTROL_INTERNAL_H

#include "static_internal.h"

/* The Program ops record into, else NULL with an error naming fn. */
pd_program *pd_ctl_recording_program(const char *fn);

/* Whether t is a bool tensor of one element (dims of 1, or 0-d); an error
 * naming fn and what otherwise. */
pd_status pd_ctl_check_bool_scalar(const pd_tensor *t, const char *fn, const char *what);

/* The Variables of enclosing blocks that the ops of sub read and sub does
 * not define, appended to caps (names borrowed from the Program) after
 * the *m already there, at most cap in all; *stop is and-ed with their
 * stop_gradient. */
pd_status pd_ctl_captures(const pd_static_block *sub, const char *fn, const char **caps, int *m, int cap,
                          bool *stop);

/* Records a copy of t into the current block (assign, or assign_array for
 * a tensor array) and renames the copy `name`. */
pd_status pd_ctl_assign_as(pd_program *p, pd_tensor *t, const char *name);

/* The name an op writing Variable v (an existing one: array_write's
 * array, assign's output) gives its output. v in the current block: a new
 * version of v (pd_ir_new_version), so the write is a new value; v of an
 * enclosing block: v itself, allowed only in an open While block (its end
 * turns the writes into loop variables). fn names the caller in errors. */
const char *pd_ctl_write_target(pd_program *p, pd_variable *v, const char *fn);

/* Appends to sub's parent the while op running sub (n loop variables
 * with initial values init, the first n_cond ops of sub computing
 * "<key>.cond", the loop variables "<key>.in_<i>" / "<key>.next_<i>"),
 * its captures found in sub, writing outs (new Variables of the parent
 * where no Variable has the name yet; stop: their stop_gradient unless a
 * capture needs a gradient). */
pd_status pd_ctl_append_while(pd_program *p, pd_static_block *sub, const char *key, const char *const *init,
                              int n, int n_cond, bool stop, const char *const *outs);

/* Whether block idx of p is the block of the innermost While open on this
 * thread (while_block.c). */
bool pd_ctl_in_while_block(const pd_program *p, int idx);

#endif
