/* paddle.static.CompiledProgram, BuildStrategy and ExecutionStrategy: a
 * Program with the compile passes and threads its runs get. The fields map
 * onto the passes of passes.h; those without meaning on CPU are kept and
 * ignored (docs/static.md). */
#include <stdlib.h>

#include "passes.h"

struct pd_compiled_program {
  pd_program *program;
  pd_build_strategy build;
  pd_execution_strategy exec;
};

pd_build_strategy pd_static_build_strategy(void) {
  return (pd_build_strategy){.fuse_elewise_add_act_ops = true,
                             .enable_auto_fusion = true,
                             .fuse_gemm_epilogue = true,
                             .enable_inplace = true,
                             .memory_optimize = true,
                             .constant_folding = true,
                             .remove_dead_ops = true,
                             .num_trainers = 1};
}

pd_execution_strategy pd_static_execution_strategy(void) {
  return (pd_execution_strategy){
      .num_threads = 0, .num_iteration_per_drop_scope = 100, .num_iteration_per_run = 1};
}

pd_compiled_program *pd_static_compiled_program(pd_program *program, const pd_build_strategy *build,
                                                const pd_execution_strategy *exec) {
  if (!program) {
    pd_set_error(PD_ERR_INVALID, "CompiledProgram: program is NULL");
    return NULL;
  }
  if (exec && exec->num_threads < 0) {
    pd_set_error(PD_ERR_INVALID, "CompiledProgram: ExecutionStrategy.num_threads is %d (expected >= 0)",
                 exec->num_threads);
    return NULL;
  }
  pd_compiled_program *cp = calloc(1, sizeof *cp);
  if (!cp) {
    pd_set_error(PD_ERR_MEMORY, "CompiledProgram: out of memory");
    return NULL;
  }
  cp->program = program;
  cp->build = build ? *build : pd_static_build_strategy();
  cp->exec = exec ? *exec : pd_static_execution_strategy();
  return cp;
}

void pd_compiled_program_release(pd_compiled_program *cp) { free(cp); }

static pd_pass_options passes_of(const pd_build_strategy *b) {
  return (pd_pass_options){.fold_constants = b->constant_folding,
                           .remove_dead_ops = b->remove_dead_ops,
                           .fuse_gemm_epilogue = b->fuse_gemm_epilogue,
                           .fuse_dropout_add = b->fuse_elewise_add_act_ops || b->enable_auto_fusion,
                           .fuse_elementwise = b->fuse_elewise_add_act_ops || b->enable_auto_fusion,
                           .inplace = b->enable_inplace,
                           .recompute = b->memory_optimize};
}

pd_status pd_executor_run_compiled(pd_executor *e, pd_compiled_program *cp, const pd_static_feed *feed,
                                   int n_feed, pd_tensor *const *fetch_list, int n_fetch, pd_tensor **fetched,
                                   pd_var_scope *scope) {
  if (!e || !cp)
    return pd_set_error(PD_ERR_INVALID, "Executor.run: %s is NULL", e ? "compiled program" : "executor");
  pd_pass_options o = passes_of(&cp->build);
  pd_executor_set_passes(e, &o); /* a no-op when they are the executor's already */
  pd_executor_set_arena(e, cp->build.memory_optimize);
  int threads = pd_get_num_threads();
  if (cp->exec.num_threads > 0) pd_set_num_threads(cp->exec.num_threads);
  pd_status st = pd_executor_run(e, cp->program, feed, n_feed, fetch_list, n_fetch, fetched, scope);
  if (cp->exec.num_threads > 0) pd_set_num_threads(threads);
  return st;
}
