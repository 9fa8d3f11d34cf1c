/* The compile passes over a lowered plan (a Program of registry ops whose
 * shapes are all known; see lower.c). pd_static_run_passes runs them in one
 * fixed order, each switched on or off by pd_pass_options (BuildStrategy's
 * fields map onto them, see executor.c):
 *
 *   1. fold_constants     pass_fold_constants.c
 *   2. remove_dead_ops    pass_remove_dead_ops.c
 *   3. fuse_gemm_epilogue pass_fuse_gemm_epilogue.c
 *   4. fuse_dropout_add   pass_fuse_dropout_add.c
 *   5. fuse_elementwise   pass_fuse_rope.c (rotary embeddings), then
 *                         pass_fuse_elementwise.c
 *   6. recompute          pass_recompute.c
 *
 * Folding first leaves constants the fusions can take as scalars; dead ops
 * go before fusion so that a value read only by a dead op does not stop a
 * chain; GEMM epilogues and dropout + add before elementwise chains, so
 * an add + relu after a matmul joins the GEMM rather than a chain, and the
 * add after a dropout its dropout; rotary embeddings before the chains,
 * which would otherwise take their backward's sums; recomputation last,
 * on the ops that will run (a fused chain is not copied). In-place reuse is not
 * a rewrite: the arena planner asks pd_pass_inplace_input (pass_inplace.c)
 * which ops may write over a dying input.
 *
 * Every pass keeps the plan's results: a fused op runs the same kernels
 * (the registry rows' 1-D functions, the GEMM entry point) on the same
 * values, so a plan computes the same bits with the passes on or off,
 * except where a pass says otherwise. */
#ifndef PADDLEC_STATIC_PASSES_H
#define PADDLEC_STATIC_PASSES_H

#include "static_internal.h"

typedef struct pd_pass_options {
  bool fold_constants;     /* ops of constants only run once, at compile time */
  bool remove_dead_ops;    /* ops whose results nothing reads are dropped */
  bool fuse_gemm_epilogue; /* matmul + bias add + activation; a weight gradient into its SGD update */
  bool fuse_dropout_add;   /* dropout and the add of its result: one pass, the same draws */
  bool fuse_elementwise;   /* chains of elementwise ops become one pass over memory */
  bool inplace;            /* the arena lets an elementwise op write over its dying input */
  bool recompute;          /* a cheap value kept across the live peak is computed again where read */
} pd_pass_options;

/* All passes on: the Executor's default. */
pd_pass_options pd_pass_options_all(void);

/* What the passes did to the last plan (for tests and the bench). */
typedef struct pd_pass_stats {
  int ops_before, ops_after;
  int folded, removed, gemm_epilogues, dropout_adds, elementwise_chains;
  int rope;       /* rotary embeddings (forward or backward) made one op */
  int inplace;    /* arena values placed over their op's dying input (the planner's count) */
  int recomputed; /* values computed again for their later readers */
} pd_pass_stats;

/* One pass's view of the plan: block 0 of the lowered program, the names
 * its fetches read (kept alive, never fused away) and an index from
 * variable names to slots. */
typedef struct pd_pass_ctx {
  pd_static_block *b;
  const char *const *fetch;
  int n_fetch;
  pd_pass_stats *stats;
  int *index, index_cap; /* variable names -> slots (pd_pass_slot) */
} pd_pass_ctx;

pd_status pd_static_run_passes(pd_program *lowered, const pd_pass_options *o, const char *const *fetch,
                               int n_fetch, pd_pass_stats *stats);

pd_status pd_pass_fold_constants(pd_pass_ctx *c);
pd_status pd_pass_remove_dead_ops(pd_pass_ctx *c);
pd_status pd_pass_fuse_gemm_epilogue(pd_pass_ctx *c);
pd_status pd_pass_fuse_dropout_add(pd_pass_ctx *c);
pd_status pd_pass_fuse_rope(pd_pass_ctx *c);
pd_status pd_pass_fuse_elementwise(pd_pass_ctx *c);
pd_status pd_pass_recompute(pd_pass_ctx *c);

/* For the arena planner: the input (an index into op's inputs) whose bytes
 * op's output 0 may take when that input dies at op, or -1. in and out are
 * the slots of op's inputs and outputs in b (-1: absent). */
int pd_pass_inplace_input(const pd_static_block *b, const pd_operator *op, const int *in_slots,
                          const int *out_slots);

/* ---- helpers the passes share (passes.c) ----------------------------------- */
/* Per variable slot of b: how many ops read it (an op reading it twice
 * counts once), plus one for each fetch; readers[] has b->n_vars entries.
 * Returns NULL with the error set when out of memory. */
int *pd_pass_count_readers(const pd_pass_ctx *c);
/* Adds slot s, a variable a pass just added to the plan, to the index. */
pd_status pd_pass_index_add(pd_pass_ctx *c, int s);
/* The slot of the variable named name in the plan, -1 for none or the
 * empty slot. */
int pd_pass_slot(const pd_pass_ctx *c, const char *name);
/* Whether the variable is fetched. */
bool pd_pass_is_fetched(const pd_pass_ctx *c, const char *name);
/* Per variable slot of b: the last op writing it, or -1; producer[] has
 * b->n_vars entries. Returns NULL with the error set when out of memory. */
int *pd_pass_producers(const pd_pass_ctx *c);
/* Records op k as the writer of its outputs in producer (a table being
 * built op by op, as pd_pass_producers does for all ops). */
void pd_pass_note_producer(const pd_pass_ctx *c, int k, int *producer);
/* Puts the op appended last to b in place of op k, freeing op k (a fused
 * or folded op taking the place of the one it stands for). */
void pd_pass_replace_op(pd_static_block *b, int k);
/* Removes the ops k of b with drop[k] set (freeing them), keeping the order. */
void pd_pass_drop_ops(pd_static_block *b, const bool *drop);
/* Whether a and b have one known shape. */
bool pd_pass_same_shape(const pd_variable *a, const pd_variable *b);
/* Whether an op between ops from and to (exclusive) may modify a value in
 * place (an inplace op, a fused update, a grad or control op): ops moved
 * across it could read another value. */
bool pd_pass_inplace_between(const pd_static_block *b, int from, int to);
/* Whether variable v's shape is fully known and its numel. */
bool pd_pass_known_shape(const pd_variable *v, int64_t *numel);

#endif
