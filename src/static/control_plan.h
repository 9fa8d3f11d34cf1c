/* Control flow in a lowered plan: each sub-block a while or
 * conditional_block op runs is compiled once into a sub-plan (its ops'
 * inputs and outputs resolved to variable slots or captured inputs), kept
 * in a cache that lives with the parent plan. Once a run has shown the
 * shape of every value the sub-block's ops write, the values that keep
 * one shape get offsets in an arena of their own (memory_plan.h), so a
 * loop body reuses the same bytes every iteration and a run allocates
 * nothing per iteration. Runs with the tape on (a while kept for its
 * while_grad, a grad op rerunning its forward: control_grad.h) use the
 * sub-plan without its arena: the tape keeps every step's values. */
#ifndef PADDLEC_CONTROL_PLAN_H
#define PADDLEC_CONTROL_PLAN_H

#include "static_internal.h"

typedef struct pd_ctl_cache pd_ctl_cache;

/* What a cache did, for tests and docs. */
typedef struct pd_ctl_stats {
  int sub_plans;      /* sub-blocks compiled */
  int arenas;         /* sub-plans that got an arena */
  size_t arena_bytes; /* their arenas' bytes together */
  int64_t into_runs;  /* ops run into an arena */
} pd_ctl_stats;

/* What the sub-plans of e's last lowered plan did (NULL when that run
 * was interpreted): for tests (executor.c). */
const pd_ctl_stats *pd_executor_control_stats(const pd_executor *e);

/* A cache for the control ops of program p (the program holding their
 * sub-blocks), its sub-plans with arenas or not; NULL with an error when
 * out of memory. */
pd_ctl_cache *pd_ctl_cache_new(const pd_program *p, bool arenas);
void pd_ctl_cache_free(pd_ctl_cache *c);
const pd_program *pd_ctl_cache_program(const pd_ctl_cache *c);
const pd_ctl_stats *pd_ctl_cache_stats(const pd_ctl_cache *c);

/* pd_static_run_control for op, a control op of c's program, through
 * sub-plans (control_run.c). */
pd_status pd_ctl_run(pd_ctl_cache *c, const pd_operator *op, pd_tensor *const *in, const bool *want,
                     pd_tensor **out);

/* The layout of while op op (control_run.c): its body, n loop variables,
 * the n_cond ops computing the condition and the slots of the condition
 * and the loop variables in the body; an error when op is no loop. */
typedef struct pd_ctl_loop {
  const pd_static_block *sub;
  int n, n_cond, cond_idx;
  int in_idx[PD_MAX_OUTPUTS], next_idx[PD_MAX_OUTPUTS];
} pd_ctl_loop;
pd_status pd_ctl_loop_layout(const pd_program *p, const pd_operator *op, pd_ctl_loop *l);

/* Runs op of block block_idx (control op ctl's) on in: new references in
 * out[0..*n); a nested control or array op through c (NULL: as it is).
 * control_run.c. */
pd_status pd_ctl_run_block_op(const pd_program *p, pd_ctl_cache *c, const pd_operator *ctl, int block_idx,
                              const pd_operator *op, pd_tensor *const *in, pd_tensor **out, int *n);

/* Whether control or array op op may hand input i on (a result, an
 * array element, a loop of no iteration's final value): such a value
 * cannot live in an arena whose bytes are reused (control_run.c). */
bool pd_ctl_may_keep_input(const pd_operator *op, int i);

/* Checks conditional_block op op and its pred in[0]; *taken: the pred
 * (control_run.c). */
pd_status pd_ctl_branch_taken(const pd_operator *op, pd_tensor *const *in, bool *taken);

/* The sub-block at op->attrs.i[which], checked (control_run.c). */
pd_status pd_ctl_sub_block(const pd_program *p, const pd_operator *op, int which,
                           const pd_static_block **sub);

/* Runs while op op from init through its body's sub-plan, writing the
 * final values (new references). */
pd_status pd_ctl_plan_loop(pd_ctl_cache *c, const pd_operator *op, pd_tensor *const *init, pd_tensor **final);
/* Runs the branch conditional_block op op takes (in[0]) through its
 * sub-plan, writing its results (new references). */
pd_status pd_ctl_plan_branch(pd_ctl_cache *c, const pd_operator *op, pd_tensor *const *in, pd_tensor **res);

#endif
