/* paddle.static: the static graph. A Program holds blocks of ops over named
 * Variables; ops called under pd_static_program_guard_begin (or after
 * pd_enable_static) are recorded into it instead of run: the same ops, the
 * same registry and the same dispatcher as eager. An Executor runs a
 * Program with feeds and fetches against a Scope that holds the persistable
 * values (parameters). docs/static.md describes the whole.
 *
 * A Variable is a pd_tensor: pd_static_data and every op recorded under the
 * guard return one. It carries name (pd_tensor_name), dtype and shape, with
 * -1 for dims unknown until the Program runs (the batch), and no data:
 * reading its values is an error. */
#ifndef PADDLEC_STATIC_H
#define PADDLEC_STATIC_H

#include "paddlec/core.h"
#include "paddlec/export.h"
#include "paddlec/model.h"
#include "paddlec/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pd_program pd_program;
typedef struct pd_static_block pd_static_block;
typedef struct pd_var_scope pd_var_scope;
typedef struct pd_executor pd_executor;

/* ---- mode ---------------------------------------------------------------
 * paddle.enable_static: from now on ops on this thread record into
 * pd_static_default_main_program (Paddle's mode is per process; here it is
 * per thread, so a DataLoader worker keeps running eagerly).
 * pd_in_dynamic_mode is false while this thread records (static mode or
 * inside a program_guard). */
PD_API void pd_enable_static(void);
PD_API void pd_disable_static(void);
PD_API bool pd_in_dynamic_mode(void);

/* ---- programs ------------------------------------------------------------ */
/* paddle.static.Program(): an empty pd_program with one (global) block. */
PD_API pd_program *pd_static_program(void);
/* Frees p and its Variables (handles the user still holds stay valid
 * tensors). NULL is a no-op; the default programs are never released by
 * the user. */
PD_API void pd_program_release(pd_program *p);
/* The programs static mode and layers record into by default, per process
 * (created on first use). */
PD_API pd_program *pd_static_default_main_program(void);
PD_API pd_program *pd_static_default_startup_program(void);
/* paddle.static.program_guard(main, startup): until the matching _end, ops
 * on this thread record into main and parameter initialisation into
 * startup (NULL: the default startup program). Guards nest; _end restores
 * what was installed before. */
PD_API pd_status pd_static_program_guard_begin(pd_program *main, pd_program *startup);
PD_API pd_status pd_static_program_guard_end(void);
/* paddle.static.name_scope(prefix): ops recorded until _end get the prefix
 * ("prefix/") in their printed form, nested scopes joined ("a/b/"). */
PD_API void pd_static_name_scope_begin(const char *prefix);
PD_API void pd_static_name_scope_end(void);

/* paddle.static.device_guard(device): ops recorded on this thread until the
 * matching _end carry op_device = device (printed with the op, written to
 * Program files). This build
 * runs on the CPU only: "cpu" and NULL/"" (no device) are accepted; "gpu",
 * "gpu:0", "xpu", ... are an error saying the device is not available; any
 * other name is an error listing Paddle's device names, and "cpu:N" an error
 * as in Paddle. Guards nest. */
PD_API pd_status pd_static_device_guard_begin(const char *device);
PD_API pd_status pd_static_device_guard_end(void);
/* paddle.static.cpu_places(device_count): device_count CPU places (0:
 * Paddle's None, the CPU_NUM environment variable, else 1). Writes up to
 * cap of them to out and returns the count, negative on an error (a
 * negative count, a CPU_NUM that is no positive number). */
PD_API int pd_static_cpu_places(int device_count, pd_place *out, int cap);
/* paddle.static.cuda_places(device_ids): as in Paddle's CPU build, an error
 * (not compiled with CUDA): returns -1 with the error set, writes nothing. */
PD_API int pd_static_cuda_places(const int *device_ids, int n_ids, pd_place *out, int cap);

PD_API pd_static_block *pd_program_global_block(pd_program *p);
PD_API int pd_program_num_blocks(const pd_program *p);
/* Program.clone(for_test): a deep copy. for_test gives the inference
 * form: backward and optimizer ops dropped, dropout the identity
 * (upscale_in_train) or a scale by 1 - p (downscale_in_infer), batch norm
 * on its running mean and variance, which it no longer updates. Variables
 * keep their names, so the same Variable handles fetch from the clone. */
PD_API pd_program *pd_program_clone(const pd_program *p, bool for_test);
/* Program.list_vars: writes up to cap Variables (borrowed) and returns how
 * many the program holds (in all blocks, in creation order). */
PD_API int pd_program_list_vars(const pd_program *p, pd_tensor **out, int cap);
/* print(program): Paddle's text form, one line per variable and op. The
 * string is malloc'd (free it), NULL on error. */
PD_API char *pd_program_to_string(const pd_program *p);
/* A counter bumped by every change (ops appended, variables renamed). */
PD_API uint64_t pd_program_version(const pd_program *p);

PD_API int pd_static_block_num_ops(const pd_static_block *b);
/* The registry name of op i ("matmul", "sgd_", ...), NULL out of range. */
PD_API const char *pd_static_block_op_type(const pd_static_block *b, int i);
PD_API int pd_static_block_num_vars(const pd_static_block *b);
/* Block.var(name): the Variable (borrowed), NULL with an error naming the
 * block's variables when unknown. */
PD_API pd_tensor *pd_static_block_var(pd_static_block *b, const char *name);

/* What the Program knows about a Variable. */
typedef struct pd_static_var_info {
  const char *name; /* borrowed from the Program */
  pd_dtype dtype;
  int ndim;
  int64_t shape[PD_MAX_DIMS];
  bool persistable, stop_gradient, is_parameter, is_data;
} pd_static_var_info;
/* Fills *info for the Variable named `name` in p. */
PD_API pd_status pd_program_var_info(const pd_program *p, const char *name, pd_static_var_info *info);

/* ---- creating Variables ---------------------------------------------------
 * paddle.static.data(name, shape, dtype): a feed Variable of the current
 * program (shape dims may be -1; stop_gradient True). NULL with an error
 * outside program_guard / static mode or for a duplicate name. */
PD_API pd_tensor *pd_static_data(const char *name, int ndim, const int64_t *shape, pd_dtype dtype);

/* paddle.static.create_parameter(shape, dtype, name, default_initializer):
 * a trainable parameter (persistable), its initial value computed now by
 * `init` (NULL: Xavier uniform, Paddle's default for weights; is_bias:
 * zeros) and written into the startup program. name NULL: "param_N". */
PD_API pd_tensor *pd_static_create_parameter(int ndim, const int64_t *shape, pd_dtype dtype, const char *name,
                                             const pd_initializer *init, bool is_bias);
/* paddle.static.create_global_var(shape, value, dtype, persistable, name):
 * a variable of the global block filled with value by the startup program. */
PD_API pd_tensor *pd_static_create_global_var(int ndim, const int64_t *shape, double value, pd_dtype dtype,
                                              bool persistable, const char *name);

/* The pd_static_data Variable an InputSpec (paddle.static.InputSpec,
 * declared in paddlec/model.h) describes. */
PD_API pd_tensor *pd_static_data_from_spec(const pd_input_spec *spec);

/* ---- layers of paddle.static.nn ---------------------------------------------
 * paddle.static.nn.fc(x, size, num_flatten_dims, activation): creates
 * parameters fc_N.w_0 [in, size] (Xavier uniform) and fc_N.b_0 [size]
 * (zeros), records x (flattened from num_flatten_dims on; <= 0 means 1)
 * @ w + b and the activation ("relu", "sigmoid", "tanh", "softmax" or
 * NULL), naming the results fc_N.tmp_0, fc_N.tmp_1, ... as Paddle does. */
PD_API pd_tensor *pd_static_nn_fc(pd_tensor *x, int64_t size, int num_flatten_dims, const char *activation);

/* ---- autodiff --------------------------------------------------------------
 * paddle.static.append_backward(loss, parameter_list, no_grad_set): appends
 * to loss's Program one grad op per forward op between the parameters and
 * loss (Paddle's <op>_grad; each runs the op's registry backward rule when
 * the Executor reaches it) and returns the (parameter, gradient) pairs:
 * up to cap pairs are written (new references), the count is returned
 * (negative: an error). parameter_list NULL: every trainable parameter of
 * the Program. Gradients are named as Paddle's (x@GRAD). Variables in
 * no_grad_set, and those with stop_gradient, get no gradient. */
PD_API int pd_static_append_backward(pd_tensor *loss, pd_tensor *const *parameter_list, int n_params,
                                     pd_tensor *const *no_grad_set, int n_no_grad, pd_tensor **params_out,
                                     pd_tensor **grads_out, int cap);
/* paddle.static.gradients(targets, inputs, target_gradients, no_grad_set):
 * the gradient Variables of sum(targets * target_gradients) (NULL: ones)
 * with respect to inputs, written to grads_out (new references; NULL where
 * no gradient flows, e.g. an input with stop_gradient). */
PD_API pd_status pd_static_gradients(pd_tensor *const *targets, int n_targets, pd_tensor *const *inputs,
                                     int n_inputs, pd_tensor *const *target_gradients,
                                     pd_tensor *const *no_grad_set, int n_no_grad, pd_tensor **grads_out);
/* optimizer.minimize(loss) with a static Variable as loss (see
 * pd_optimizer_minimize in paddlec/optim.h) appends the backward and one
 * update op per parameter, the same op the eager step runs: its
 * accumulators and the learning rate (learning_rate_N) become persistable
 * Variables the startup program initialises. With an LRScheduler the
 * Executor sets the rate from the scheduler before every run; gradient
 * clipping (by value, norm or global norm) is recorded as eager computes
 * it. An optimizer created while a Program is being
 * built may be given no parameters (NULL, 0): minimize then updates every trainable parameter of the Program.
 */

/* ---- py_func ----------------------------------------------------------------
 * A user function as an op. It is given the n_in input tensors and writes
 * n_out new tensors (references it hands over) to out; PD_OK or an error. */
typedef pd_status (*pd_py_func_fn)(void *user, pd_tensor *const *in, int n_in, pd_tensor **out, int n_out);
/* paddle.static.py_func(func, x, out, backward_func): a py_func op over the
 * n_x inputs x whose n_out outputs are described by out_specs (dtype, shape;
 * a -1 dim is the size of the same dim of x[0], the batch), written to out
 * (new references). Under program_guard it is recorded and the Executor
 * calls func on each run's values; eagerly it runs at once. backward_func
 * (NULL: no gradient flows through the op, as in Paddle) is given x...,
 * out..., then the gradient of each out (2 n_out + n_x tensors) and writes
 * one gradient per x (NULL for none), each shaped as its x. A result of
 * another dtype or shape than its spec is an error naming the output. The
 * callbacks are kept for the life of the process: a Program holding
 * py_func runs only in the process that built it (up to 256 different
 * callback sets). */
PD_API pd_status pd_static_py_func(pd_py_func_fn func, void *user, pd_tensor *const *x, int n_x,
                                   const pd_input_spec *out_specs, int n_out, pd_tensor **out,
                                   pd_py_func_fn backward_func);

/* ---- scopes ---------------------------------------------------------------
 * paddle.static.Scope(): a pd_var_scope, name -> tensor, where persistable
 * Variables (parameters, optimizer state) live between Executor runs.
 * Releasing it releases its tensors (NULL and the global scope: no-op). */
PD_API pd_var_scope *pd_static_scope(void);
PD_API void pd_var_scope_release(pd_var_scope *s);
/* The process-wide scope runs use when given none. */
PD_API pd_var_scope *pd_static_global_scope(void);
/* paddle.static.scope_guard: runs given no scope use s until _end (nests). */
PD_API pd_status pd_static_scope_guard_begin(pd_var_scope *s);
PD_API pd_status pd_static_scope_guard_end(void);
/* scope.find_var(name).get_tensor(): the tensor (borrowed), NULL when the
 * scope holds no such name (no error set: a query). */
PD_API pd_tensor *pd_var_scope_find_var(pd_var_scope *s, const char *name);
/* Sets name to t (retained), replacing what was there. */
PD_API pd_status pd_var_scope_set_var(pd_var_scope *s, const char *name, pd_tensor *t);

/* ---- the executor ---------------------------------------------------------
 * paddle.static.Executor(place): a pd_executor, CPU only for now. */
PD_API pd_executor *pd_static_executor(pd_place place);
PD_API void pd_executor_release(pd_executor *e);

/* One entry of the feed dict: the data Variable's name and its value. */
typedef struct pd_static_feed {
  const char *name;
  pd_tensor *value;
} pd_static_feed;

/* Executor.run(program, feed, fetch_list, scope): runs the global block of
 * program (NULL: the default main program) with the feeds, then writes one
 * new tensor per fetch_list entry (a Variable of the program) to fetched.
 * scope NULL: the scope_guard's or the global scope. A feed whose name is
 * no data Variable, or whose dtype or shape (where not -1) differs from it,
 * an unknown fetch and a missing persistable value are errors naming the
 * Variable. Persistable results (updated parameters) stay in the scope. */
PD_API pd_status pd_executor_run(pd_executor *e, pd_program *program, const pd_static_feed *feed, int n_feed,
                                 pd_tensor *const *fetch_list, int n_fetch, pd_tensor **fetched,
                                 pd_var_scope *scope);

/* ---- CompiledProgram, BuildStrategy, ExecutionStrategy ----------------------
 * (docs/static.md, "Compile passes"). A run lowers the Program for its feed
 * shapes into a flat plan, then runs compile passes over it; BuildStrategy
 * says which. pd_static_build_strategy() gives the defaults, which are
 * paddle.c's (every pass on: each keeps the results), not Paddle's (where
 * most fusions are off). Fields marked "accepted" have no meaning on CPU
 * and change nothing. */
typedef struct pd_build_strategy {
  /* the passes */
  bool fuse_elewise_add_act_ops; /* chains of elementwise ops (add + relu, and longer) as one pass */
  bool enable_auto_fusion;       /* the same fusion (Paddle's CINN pass); either field turns it on */
  bool fuse_gemm_epilogue;       /* matmul + bias add + activation; a weight gradient into its SGD update */
  bool enable_inplace;           /* an elementwise op may write over an input that dies there */
  bool memory_optimize;          /* liveness-based buffer planning: every value in one arena; a cheap
                                    value held across the live peak is recomputed where read again */
  bool constant_folding;         /* paddle.c: ops of constants run once, when the plan is made */
  bool remove_dead_ops;          /* paddle.c: ops no fetch or update needs are dropped */
  /* accepted: no meaning on CPU (batch norm and depthwise conv fusions are
   * cuDNN's; all-reduce fusion, sync batch norm and the reduce strategy are
   * multi-device; graphviz output is not written) */
  bool fuse_bn_act_ops, fuse_bn_add_act_ops, fuse_relu_depthwise_conv, fuse_broadcast_ops;
  bool fuse_all_optimizer_ops, fuse_all_reduce_ops, sync_batch_norm, enable_sequential_execution;
  bool enable_addto, fuse_dot_product_attention, fuse_resunit, allow_cuda_graph_capture;
  int reduce_strategy;         /* 0 AllReduce, 1 Reduce */
  int gradient_scale_strategy; /* 0 CoeffNumDevice, 1 One, 2 Customized */
  const char *debug_graphviz_path;
  int num_trainers, trainer_id;
} pd_build_strategy;

/* paddle.static.BuildStrategy(): the defaults (every pass on). */
PD_API pd_build_strategy pd_static_build_strategy(void);

/* paddle.static.ExecutionStrategy. num_threads > 0: the OpenMP threads the
 * runs use (pd_set_num_threads for the run's duration); 0 leaves the
 * process's setting. The rest are accepted: the Executor keeps no per-step
 * local scopes and runs one iteration per call. */
typedef struct pd_execution_strategy {
  int num_threads;
  int num_iteration_per_drop_scope;
  int num_iteration_per_run;
  bool use_thread_barrier;
} pd_execution_strategy;

/* paddle.static.ExecutionStrategy(): num_threads 0, one iteration per run,
 * drop scope every 100 iterations (Paddle's defaults). */
PD_API pd_execution_strategy pd_static_execution_strategy(void);

typedef struct pd_compiled_program pd_compiled_program;

/* paddle.static.CompiledProgram(program, build_strategy): program (retained
 * by reference: it must outlive the compiled program) with the strategies
 * (NULL: the defaults; copied). Run it with pd_executor_run_compiled. */
PD_API pd_compiled_program *pd_static_compiled_program(pd_program *program, const pd_build_strategy *build,
                                                       const pd_execution_strategy *exec);
PD_API void pd_compiled_program_release(pd_compiled_program *cp);

/* Executor.run(compiled_program, ...): pd_executor_run on the compiled
 * program's Program with its passes and threads. The executor keeps the
 * plan it made until the program, the feed shapes, the fetches or the
 * strategy change. */
PD_API pd_status pd_executor_run_compiled(pd_executor *e, pd_compiled_program *cp, const pd_static_feed *feed,
                                          int n_feed, pd_tensor *const *fetch_list, int n_fetch,
                                          pd_tensor **fetched, pd_var_scope *scope);

/* ---- Program files (docs/static.md, "Program files") ----------------------
 * A Program file is JSON: {"magic": "paddle.c program", "version": 1,
 * "is_test": ..., "blocks": [{"idx", "parent_idx", "vars": [{"name",
 * "dtype", "shape" (-1: unknown), "persistable", "stop_gradient",
 * "is_parameter", "is_data"}], "ops": [{"type", "inputs", "outputs" (names
 * by slot), "attrs" (by the registry row's names), "role", "name_scope",
 * from version 3 "op_device" where set}, ...]}]}; a grad op adds "grad_of",
 * "fwd_n_in", "fwd_n_out", a constant (assign_value) its "value" {"dtype",
 * "shape", "data": hex bytes}. A file has the lowest version that holds
 * what it uses (2: control flow, 3: op_device).
 * Persistable values are safetensors files.
 *
 * paddle.static.serialize_program: the Program's file image (malloc'd,
 * NUL-terminated, *size bytes without the NUL; free it), NULL on error. */
PD_API char *pd_static_serialize_program(const pd_program *p, size_t *size);
/* paddle.static.deserialize_program: a new Program from a file image. A
 * bad, truncated or newer-version image is NULL with an error naming the
 * block, op or variable and what is wrong. Variables are meta tensors;
 * persistable values come from deserialize_persistables / static.load. */
PD_API pd_program *pd_static_deserialize_program(const void *data, size_t size);
/* paddle.static.serialize_persistables: a safetensors image (malloc'd, free
 * it) of every persistable variable of p's global block, its value taken
 * from scope (NULL: the current scope); a missing value is an error. */
PD_API void *pd_static_serialize_persistables(const pd_program *p, pd_var_scope *scope, size_t *size);
/* paddle.static.deserialize_persistables: sets p's persistable variables in
 * scope (NULL: the current one) from a safetensors image. */
PD_API pd_status pd_static_deserialize_persistables(pd_program *p, const void *data, size_t size,
                                                    pd_var_scope *scope);
/* save_to_file / load_from_file: bytes to and from a file (the read is
 * malloc'd and NUL-terminated; free it). */
PD_API pd_status pd_static_save_to_file(const char *path, const void *data, size_t size);
PD_API void *pd_static_load_from_file(const char *path, size_t *size);
/* Writes the persistable values of p (from scope) to a safetensors file. */
PD_API pd_status pd_static_save_persistables_file(const pd_program *p, const char *path, pd_var_scope *scope);
/* A Program read from a Program file (errors name the path). */
PD_API pd_program *pd_static_load_program_file(const char *path);
/* paddle.static.save(program, model_path): <model_path>.pdmodel (the
 * Program) and <model_path>.pdparams (its persistable values from scope). */
PD_API pd_status pd_static_save(const pd_program *p, const char *model_path, pd_var_scope *scope);
/* paddle.static.load(program, model_path): the values of
 * <model_path>.pdparams into scope for p's persistable variables; every one
 * must be there with its dtype and shape, else nothing is set. */
PD_API pd_status pd_static_load(pd_program *p, const char *model_path, pd_var_scope *scope);
/* paddle.static.load_program_state(model_path): the tensors of
 * <model_path>.pdparams (free with pd_state_free). */
PD_API pd_status pd_static_load_program_state(const char *model_path, pd_named_tensors *out);
/* paddle.static.set_program_state(program, state): sets p's persistable
 * variables in scope (NULL: the current one) from state, checked first. */
PD_API pd_status pd_static_set_program_state(pd_program *p, const pd_named_tensors *state,
                                             pd_var_scope *scope);

/* ---- inference models -------------------------------------------------------
 * paddle.static.save_inference_model(path_prefix, feed_vars, fetch_vars,
 * executor, program): writes <path_prefix>.pdmodel, the Program (NULL: the
 * default main program) pruned to the forward ops the fetches need, and
 * <path_prefix>.pdiparams, the persistable values those ops read (from
 * scope, NULL: the current one; a parameter the scope lacks is saved with
 * the value it was created with), whose metadata names the feeds and
 * fetches. The Program is saved in its clone(for_test) form: dropout off,
 * batch norm on its running statistics. */
PD_API pd_status pd_static_save_inference_model(const char *path_prefix, pd_tensor *const *feed_vars,
                                                int n_feed, pd_tensor *const *fetch_vars, int n_fetch,
                                                pd_program *program, pd_var_scope *scope);
/* The same with the feeds and fetches given by Variable name. */
PD_API pd_status pd_static_save_inference_model_names(const char *path_prefix, char *const *feed, int n_feed,
                                                      char *const *fetch, int n_fetch,
                                                      const pd_program *program, pd_var_scope *scope);
/* What load_inference_model returns: the Program and its feed and fetch
 * Variable names, in the order they were saved (all owned). */
typedef struct pd_inference_model {
  pd_program *program;
  int n_feed, n_fetch;
  char **feed_names, **fetch_names;
} pd_inference_model;
/* paddle.static.load_inference_model(path_prefix, executor): the Program of
 * <path_prefix>.pdmodel into *out and its values into scope (NULL: the
 * current one); run it with pd_executor_run, feeding feed_names and
 * fetching fetch_names. */
PD_API pd_status pd_static_load_inference_model(const char *path_prefix, pd_var_scope *scope,
                                                pd_inference_model *out);
PD_API void pd_inference_model_free(pd_inference_model *m);

#ifdef __cplusplus
}
#endif

#endif
