/* The grad ops of the control-flow and tensor array ops (control_grad.c),
 * and a while or conditional_block keeping its taped run for its grad ops. */
#ifndef PADDLEC_CONTROL_GRAD_H
#define PADDLEC_CONTROL_GRAD_H

#include "control_plan.h"

/* Runs forward control or array op op on in, writing all its results (new
 * references) to res; through the sub-plans of c (NULL: interpreted).
 * control_run.c. */
pd_status pd_ctl_forward(const pd_program *p, pd_ctl_cache *c, const pd_operator *op, pd_tensor *const *in,
                         pd_tensor **res);

/* Grad op op (of a forward of kind op->ctl): inputs [forward inputs (fi),
 * forward outputs (fo), output gradients (fo)], out one gradient per
 * forward input with want[j] set. Reruns the forward on leaves standing
 * for its inputs with the tape on and differentiates it. */
pd_status pd_ctl_grad(const pd_program *p, pd_ctl_cache *c, const pd_operator *op, pd_tensor *const *in,
                      const bool *want, pd_tensor **out);

/* Whether a control op of kind k keeps its taped run for its grad ops: a
 * while (each iteration's values) or a conditional_block (the branch
 * taken). */
bool pd_ctl_keeps_taped_run(pd_ctl_kind k);

/* A while's or conditional_block's taped run, kept for its grad ops: the
 * leaves standing for its inputs and its results, whose graph holds what
 * the grad rules of the ops that ran read (per iteration, for a while). */
typedef struct pd_ctl_kept pd_ctl_kept;

/* Runs while or conditional_block op op on in as pd_static_run_control
 * does (the same values in out[k] with want[k] set, cut from the tape)
 * and, when grad_want asks a gradient for a floating input, with the tape
 * on from leaves of the inputs, setting *kept to the run (else NULL: the
 * op ran as without a grad op). */
pd_status pd_ctl_run_kept(const pd_program *p, pd_ctl_cache *c, const pd_operator *op, pd_tensor *const *in,
                          const bool *want, const bool *grad_want, pd_tensor **out, pd_ctl_kept **kept);

/* Grad op op (as pd_ctl_grad) from kept, the run of its forward: no
 * forward runs. A kept run of other inputs than in (or none) is not used:
 * the forward reruns on in. last: no grad op reads kept after this one,
 * so the tape drops what its grad rules read as it goes; else it keeps
 * them and kept serves the next grad op too. kept stays the caller's to
 * free. */
pd_status pd_ctl_grad_kept(const pd_program *p, pd_ctl_cache *c, pd_ctl_kept *kept, const pd_operator *op,
                           pd_tensor *const *in, const bool *want, bool last, pd_tensor **out);

void pd_ctl_kept_free(pd_ctl_kept *k);

#endif
