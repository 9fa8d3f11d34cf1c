/* Liveness-based buffer planning for a compiled Program: every value an op
 * writes gets an offset in one arena, computed before anything runs, so a
 * step allocates nothing. Two values share bytes only when their lifetimes
 * (first write to last read) do not overlap; an op may write its output
 * over an input that dies at that op (in place) where the op allows it.
 *
 * The planner knows nothing of tensors or ops: a value is a byte size, an
 * op is the list of values it reads and writes, in execution order. */
#ifndef PADDLEC_STATIC_MEMORY_PLAN_H
#define PADDLEC_STATIC_MEMORY_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "paddlec/core.h"

/* Every offset is a multiple of this (cache lines; AVX-512 loads). */
#define PD_PLAN_ALIGN 64

typedef struct pd_plan_value {
  size_t bytes;
  /* Not planned: lives elsewhere (a feed, a persistable parameter, a
   * constant). Its offset stays -1. */
  bool external;
  /* Read after the last op (a fetch target): live to the end. */
  bool keep;
  /* Written in parts by several ops (a buffer whose pieces are other
   * values, e.g. a gradient bucket): placed at its first write, live to
   * its last read or write, never placed over an input in place. */
  bool shared_writes;
} pd_plan_value;

typedef struct pd_plan_op {
  const int *in; /* value ids the op reads (may repeat) */
  int n_in;
  const int *out; /* value ids the op writes, each written by this op only (unless shared_writes) */
  int n_out;
  /* Output 0 may take the bytes of input number `inplace_in` (an index
   * into in[]) when that input dies at this op and has the same size (an
   * elementwise op reads element i before it writes element i); -1: never. */
  int inplace_in;
} pd_plan_op;

typedef struct pd_memory_plan {
  int64_t *offset;    /* per value: byte offset in the arena, -1 when external or never written */
  size_t arena_bytes; /* the arena the plan needs */
  size_t naive_bytes; /* sum of the planned values' (aligned) sizes: one buffer each */
  size_t live_peak;   /* the most bytes live at once: no plan can need fewer */
  int n_inplace;      /* outputs placed over their input */
} pd_memory_plan;

/* Plans n_values values for n_ops ops. A value read before it is written,
 * written twice, or an id out of range is an error naming the op and the
 * value. On success *plan holds the result (free it with
 * pd_memory_plan_free). */
pd_status pd_memory_plan_build(const pd_plan_value *values, int n_values, const pd_plan_op *ops, int n_ops,
                               pd_memory_plan *plan);
void pd_memory_plan_free(pd_memory_plan *plan);

#endif
