/* The micro-batch orders of the pipeline schedules. Each stage has its own
 * order of forwards (F) and backwards (B) of the A micro-batches:
 *   FThenB: F0 .. F(A-1), then B0 .. B(A-1);
 *   1F1B:   stage s of S runs w = min(S - s - 1, A) forwards (warmup), then
 *           A - w times one forward and one backward (steady), then the w
 *           backwards left (cooldown), as Paddle's PipelineParallel.
 * Every rank walks one merged order of all stages' actions (ranks outside
 * a stage only take part in its moves), built round by round: in each
 * round each stage, in stage order, takes its next action when what it
 * needs is done (F of stage s needs F of s - 1; B of s needs B of s + 1, or
 * its own F on the last stage). */
#include <stdlib.h>

#include "ap_internal.h"

/* Stage s's own order into out (2 * A actions). */
static void stage_order(pd_ap_pipe_mode mode, int S, int A, int s, pd_ap_pipe_action *out) {
  int n = 0, f = 0, b = 0;
  int warmup = mode == PD_AP_PIPE_FTHENB ? A : (S - s - 1 < A ? S - s - 1 : A);
  while (f < warmup) out[n++] = (pd_ap_pipe_action){s, f++, false};
  while (f < A) { /* steady: one forward, one backward */
    out[n++] = (pd_ap_pipe_action){s, f++, false};
    out[n++] = (pd_ap_pipe_action){s, b++, true};
  }
  while (b < A) out[n++] = (pd_ap_pipe_action){s, b++, true};
}

pd_status pd_ap_pipe_order(pd_ap_pipe_mode mode, int S, int A, pd_ap_pipe_action *out) {
  if (S < 1 || A < 1)
    return pd_set_error(PD_ERR_INVALID,
                        "pipeline schedule: %d stages and %d micro-batches (both must be >= 1)", S, A);
  size_t per = 2 * (size_t)A;
  pd_ap_pipe_action *own = malloc(per * (size_t)S * sizeof *own);
  int *next = calloc((size_t)S, sizeof *next);
  /* done[(s * A + i) * 2 + backward] */
  bool *done = calloc(per * (size_t)S, sizeof *done);
  if (!own || !next || !done) {
    free(own), free(next), free(done);
    return pd_set_error(PD_ERR_MEMORY, "pipeline schedule: out of memory");
  }
  for (int s = 0; s < S; s++) stage_order(mode, S, A, s, own + per * (size_t)s);
  size_t n = 0, total = per * (size_t)S;
  pd_status st = PD_OK;
  while (n < total && st == PD_OK) {
    bool progress = false;
    for (int s = 0; s < S; s++) {
      if ((size_t)next[s] == per) continue;
      pd_ap_pipe_action a = own[per * (size_t)s + (size_t)next[s]];
      int i = a.micro_batch;
      bool ready = !a.backward  ? s == 0 || done[(((size_t)s - 1) * (size_t)A + (size_t)i) * 2]
                   : s == S - 1 ? done[((size_t)s * (size_t)A + (size_t)i) * 2]
                                : done[(((size_t)s + 1) * (size_t)A + (size_t)i) * 2 + 1];
      if (!ready) continue;
      done[((size_t)s * (size_t)A + (size_t)i) * 2 + a.backward] = true;
      out[n++] = a;
      next[s]++;
      progress = true;
    }
    if (!progress) /* not reachable with the orders above; a guard against a hang */
      st = pd_set_error(PD_ERR_STATE, "pipeline schedule: the stages' orders wait on each other");
  }
  free(own), free(next), free(done);
  return st;
}
