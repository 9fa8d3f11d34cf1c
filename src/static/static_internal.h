/* The static graph's internals: the Program IR (programs, blocks, variables,
 * operators), shared by the recorder, the executor and the backward. */
#ifndef PADDLEC_STATIC_INTERNAL_H
#define PADDLEC_STATIC_INTERNAL_H

#include "../ops/op_registry.h"
#include "paddlec/optim.h"
#include "paddlec/static.h"

/* What the IR does with a Variable's dist_attr, which it does not look
 * into: semi-automatic parallelism, which fills it, says how to free it
 * and how to copy it (NULL with the error set when out of memory) for a
 * copy of the Variable (pd_ir_copy_var, pd_ir_clone). */
typedef struct pd_var_attr_ops {
  void (*free)(void *attr);
  void *(*copy)(const void *attr);
} pd_var_attr_ops;

/* A Variable: a named, typed value of a block. Its handle is a tensor: a
 * meta tensor (no storage, dims may be -1) for values computed when the
 * Program runs, or the eager tensor it stands for (a layer's parameter, a
 * constant), whose data is the Variable's initial value. */
typedef struct pd_variable {
  char *name;
  pd_dtype dtype;
  int ndim;
  int64_t shape[PD_MAX_DIMS];
  bool persistable, stop_gradient, is_parameter, is_data;
  bool is_array;   /* a tensor array (LOD_TENSOR_ARRAY): dtype and shape are its elements' */
  void *dist_attr; /* semi-automatic parallelism fills it (owned) */
  const pd_var_attr_ops *dist_attr_ops;
  pd_tensor *tensor; /* owned reference */
  int scratch;       /* backward generation's index of the variable */
} pd_variable;

/* Paddle's op_role: what part of a training step an op belongs to. */
enum { PD_OP_ROLE_FORWARD = 0, PD_OP_ROLE_BACKWARD = 1, PD_OP_ROLE_OPTIMIZE = 2, PD_OP_ROLE_LOSS = 0x100 };

/* Ops that are not registry rows: run by the executor itself. */
#define PD_STATIC_ASSIGN_VALUE "assign_value" /* out = a copy of op->value */

/* Control flow (control_flow.c, control_run.c): a while op runs sub-block
 * attrs.i[0] (see pd_static_nn_while_loop); a conditional_block op runs
 * sub-block attrs.i[0] or attrs.i[1] (see pd_static_nn_cond); their grad
 * ops are while_grad and conditional_block_grad. The tensor array ops
 * (tensor_array.c) take and give array values. None is a registry row:
 * the executor runs them through pd_static_run_control. */
#define PD_STATIC_WHILE "while"
#define PD_STATIC_WHILE_GRAD "while_grad"
#define PD_STATIC_COND "conditional_block"
#define PD_STATIC_COND_GRAD "conditional_block_grad"
#define PD_STATIC_CREATE_ARRAY "create_array"              /* () -> an empty array */
#define PD_STATIC_WRITE_ARRAY "write_to_array"             /* (x, i, array) -> array with x at i */
#define PD_STATIC_READ_ARRAY "read_from_array"             /* (array, i) -> element i */
#define PD_STATIC_ARRAY_LENGTH "lod_array_length"          /* (array) -> int64 [] */
#define PD_STATIC_ARRAY_TO_TENSOR "tensor_array_to_tensor" /* (array) -> (out, out_index) */
#define PD_STATIC_ASSIGN_ARRAY "assign_array"              /* (array) -> the same array */
#define PD_STATIC_ARRAY_ADD "array_add" /* (a, b) -> the sums of their elements (gradients) */

/* The kind of a control-flow or tensor array op (pd_operator.ctl), in the
 * order of the types above; the IR resolves it from the type when the op
 * is appended, so running one compares no strings. */
typedef enum pd_ctl_kind {
  PD_CTL_NONE = 0, /* not a control or array op */
  PD_CTL_WHILE,
  PD_CTL_COND,
  PD_CTL_CREATE_ARRAY,
  PD_CTL_WRITE_ARRAY,
  PD_CTL_READ_ARRAY,
  PD_CTL_ARRAY_LENGTH,
  PD_CTL_ARRAY_TO_TENSOR,
  PD_CTL_ASSIGN_ARRAY,
  PD_CTL_ARRAY_ADD
} pd_ctl_kind;

/* The name of an absent slot of a grad op (Paddle's kEmptyVarName). */
#define PD_STATIC_EMPTY_VAR "@EMPTY@"

/* A fused op of a lowered plan, made by the compile passes (passes.h): one
 * op standing for several registry ops. The executor runs it with run(),
 * its outputs allocated (in the arena or not) with the shapes and dtypes of
 * their Variables. */
typedef struct pd_fused_op pd_fused_op;
struct pd_fused_op {
  pd_status (*run)(const pd_fused_op *f, pd_tensor *const *in, int n_in, pd_tensor *const *out, int n_out);
  void (*release)(pd_fused_op *f);
  int n_ops;        /* registry ops it replaced */
  bool elementwise; /* output 0's element i depends on element i of each same-shaped input only */
};

/* An operator: a registry op (op_id >= 0), assign_value (op_id -1) or the
 * grad op of registry op grad_of (op_id -1), its inputs and outputs by slot
 * (positional, as the registry row takes them) as variable names, and its
 * attributes. A grad op "<op>_grad" takes the forward op's inputs, then
 * its outputs, then one gradient per output (PD_STATIC_EMPTY_VAR where none
 * flows), and writes one gradient per forward input (PD_STATIC_EMPTY_VAR
 * where none is needed); it runs the registry row's backward rule. */
typedef struct pd_operator {
  char *type;
  int op_id;
  int grad_of, fwd_n_in, fwd_n_out;
  pd_attrs attrs;
  int n_in, n_out;
  char **inputs, **outputs;
  pd_tensor *value; /* assign_value: the constant (owned) */
  /* assign_value of a lowered plan: the run uses value itself, not a copy
   * (a folded constant that no op writes and no fetch returns) */
  bool shared_value;
  pd_fused_op *fused; /* a fused op (op_id -1; owned), else NULL */
  pd_ctl_kind ctl;    /* a control or array op's kind (of its forward op when ctl_grad), else NONE */
  bool ctl_grad;      /* the grad op ("<type>_grad") of control or array op kind ctl */
  int role;
  char name_scope[64]; /* "/prefix/" of the name_scope it was recorded in, or "" */
  char op_device[16];  /* the device_guard it was recorded under ("cpu"), or "" */
  /* a control or array op of a lowered plan: the op of the source program
   * it stands for (its sub-blocks and the names they read); borrowed */
  const struct pd_operator *lowered_from;
} pd_operator;

struct pd_static_block {
  pd_program *program;
  int idx, parent_idx;
  pd_variable **vars;
  int n_vars, cap_vars;
  pd_operator **ops;
  int n_ops, cap_ops;
};

/* Tensor handle -> variable, for the recorder (open addressing). */
typedef struct pd_var_map {
  const pd_tensor **keys;
  pd_variable **vals;
  int cap, n;
} pd_var_map;

/* A learning-rate Variable an LRScheduler drives: before every run the
 * executor sets it to the scheduler's value times mult (Paddle's executor
 * does the same for program.lr_scheduler). */
typedef struct pd_lr_entry {
  char *var;
  double mult;
  pd_lr_scheduler *sched; /* retained */
} pd_lr_entry;

struct pd_program {
  pd_static_block **blocks;
  int n_blocks, cap_blocks;
  int current_block;
  uint64_t version; /* bumped by every change: the executor's plan cache key */
  pd_var_map map;
  bool is_test;
  pd_lr_entry *lr;
  int n_lr;
};

/* ---- IR construction (program.c) ---------------------------------------- */
/* Adds a variable (name copied; must be new in the block). handle: the
 * tensor that stands for it (retained), or NULL to create a meta tensor. */
pd_variable *pd_ir_add_var(pd_static_block *b, const char *name, pd_dtype dt, int ndim, const int64_t *shape,
                           pd_tensor *handle);
/* The index of block b's own variable `name` in b->vars, or -1. */
int pd_ir_var_index(const pd_static_block *b, const char *name);
pd_variable *pd_ir_find_var(const pd_static_block *b, const char *name);
/* Makes t a second handle of v: ops recorded on t name v (a distributed
 * parameter whose Variable has the global shape, t being its local shard). */
pd_status pd_ir_alias_handle(pd_program *p, const pd_tensor *t, pd_variable *v);
/* Appends an empty block whose parent is block parent_idx (-1: none). */
pd_static_block *pd_ir_add_block(pd_program *p, int parent_idx);
/* Looks the name up in b, then in its ancestors. */
pd_variable *pd_ir_find_var_recursive(const pd_static_block *b, const char *name);
/* The variable whose handle is t, anywhere in the program (NULL: none). */
pd_variable *pd_ir_var_of(const pd_program *p, const pd_tensor *t);
/* Appends an op; names are copied. type: a registry name or assign_value. */
pd_operator *pd_ir_append_op(pd_static_block *b, const char *type, const char *const *inputs, int n_in,
                             const char *const *outputs, int n_out, const pd_attrs *attrs);
/* Appends the grad op of registry op fwd (see pd_operator). */
pd_operator *pd_ir_append_grad_op(pd_static_block *b, pd_op_id fwd, int fwd_n_in, int fwd_n_out,
                                  const char *const *inputs, const char *const *outputs,
                                  const pd_attrs *attrs);
/* Adds an LRScheduler-driven learning rate (see pd_lr_entry). */
pd_status pd_ir_add_lr_entry(pd_program *p, const char *var, double mult, pd_lr_scheduler *sched);
/* Appends fused op f (taking it) as an op named type: lowered plans only
 * (a Program holding one is not cloned or written to files). */
pd_operator *pd_ir_append_fused_op(pd_static_block *b, const char *type, const char *const *inputs, int n_in,
                                   const char *const *outputs, int n_out, pd_fused_op *f);
/* Drops op k of b (the ops after it move up). */
void pd_ir_remove_op(pd_static_block *b, int k);
/* Drops the ops of b from index n on (a lowering attempt given up). */
void pd_ir_truncate_ops(pd_static_block *b, int n);
/* Makes slot, one of an op's inputs or outputs, name a copy of name (the
 * old name freed); unchanged with an error when out of memory. */
pd_status pd_ir_set_slot(char **slot, const char *name);
/* Renames variable `from` to `to` in b: the variable, its handle's name and
 * every op of the program that names it. */
pd_status pd_ir_rename_var(pd_static_block *b, const char *from, const char *to);
/* A new version of v in b (named v@V1, v@V2, ...): a Variable of v's
 * dtype, shape and flags (not persistable, parameter or data) that takes
 * over v's handle, so the ops recorded from now on with that handle read
 * the new version, while the ops recorded before keep reading v (which
 * gets a fresh handle). How a write to an existing Variable (array_write,
 * assign to an output, a While's loop variables) stays a new value. */
pd_variable *pd_ir_new_version(pd_static_block *b, pd_variable *v);
/* Gives v's handle (v->tensor) to nv, a Variable just added to the same
 * Program whose own handle goes to v: the ops recorded from now on with
 * the handle read nv, those recorded before keep reading v. A meta handle
 * takes nv's shape and the one v gets v's, so each handle's shape is its
 * Variable's (an inplace shape change recorded as a new value); a handle
 * with data keeps its geometry, which nv must then have. */
pd_status pd_ir_give_handle(pd_program *p, pd_variable *v, pd_variable *nv);
/* A variable of b named and flagged as sv (persistable, parameter, data, array,
 * stop_gradient), with a copy of its dist_attr; handle as for pd_ir_add_var. */
pd_variable *pd_ir_copy_var(pd_static_block *b, const pd_variable *sv, pd_tensor *handle);
/* Appends a copy of op so (a grad op stays one) to b. */
pd_operator *pd_ir_copy_op(pd_static_block *b, const pd_operator *so);
/* Deep copy. for_test: the inference form (pd_ir_copy_op_for_test). */
pd_program *pd_ir_clone(const pd_program *p, bool for_test);
/* The values a for_test clone of a block no longer computes (borrowed
 * names of the source block). */
typedef struct pd_test_dead {
  const char **names;
  int n, cap;
} pd_test_dead;
void pd_test_dead_free(pd_test_dead *d);
/* clone(for_test) of op k of src into dst (clone_test.c): 1 when it was
 * replaced by its inference form or dropped (a backward or optimizer op,
 * or one reading a value only training computes), 0 when it is copied as
 * it is, -1 on an error. */
int pd_ir_copy_op_for_test(pd_static_block *dst, const pd_static_block *src, int k, pd_test_dead *dead);
void pd_ir_touch(pd_program *p);

/* ---- names (names.c) ----------------------------------------------------- */
/* Paddle's unique_name.generate: "key_0", "key_1", ... per key, process-wide. */
void pd_static_unique_name(const char *key, char *out, size_t cap);
/* The innermost name_scope prefix ("" when none), e.g. "block1/". */
const char *pd_static_name_scope_prefix(void);

/* ---- device_guard (places.c) ---------------------------------------------- */
/* The device of the innermost device_guard on this thread ("" when none). */
const char *pd_static_current_device(void);
/* Whether device names one this build runs on ("cpu", or "" for none):
 * else an error starting with who, saying why (an accelerator this build
 * lacks, a cpu with an id, an unknown name). */
pd_status pd_static_check_device(const char *who, const char *device);

/* ---- recording (recorder.c) ---------------------------------------------- */
/* The program ops record into on this thread (NULL outside program_guard
 * and static mode) and its startup program. */
pd_program *pd_static_current_main(void);
pd_program *pd_static_current_startup(void);
/* The variable standing for t in the current main program, registering t
 * (a parameter: persistable, initialised by the startup program; another
 * eager tensor: a constant) the first time it is seen. */
pd_variable *pd_static_var_for(pd_program *p, pd_tensor *t);
/* The role recorded ops get (backward generation sets it). */
int pd_static_set_role(int role);
/* Records this thread's ops into p (its own startup program too) until
 * pd_static_record_end: the executor's lowering. */
pd_status pd_static_record_begin(pd_program *p);
void pd_static_record_end(void);
/* Suspends recording on this thread (an eager computation inside a guard,
 * e.g. a parameter's initial value): returns a token for resume. */
typedef struct pd_static_pause {
  pd_tracer_fn fn;
  void *ctx;
} pd_static_pause;
pd_static_pause pd_static_pause_begin(void);
void pd_static_pause_end(pd_static_pause token);

/* ---- backward (backward.c) ------------------------------------------------- */
/* The program a Variable belongs to: the one being built on this thread,
 * else the default main program; NULL with an error naming fn otherwise. */
pd_program *pd_static_program_of(const pd_tensor *t, const char *fn);
/* Appends grad ops for targets to p's global block and writes the gradient
 * Variable of each wanted variable (NULL where none flows). */
pd_status pd_static_build_backward(pd_program *p, pd_variable *const *targets,
                                   pd_variable *const *target_grads, int n_targets,
                                   pd_variable *const *no_grad, int n_no_grad, pd_variable *const *wanted,
                                   int n_wanted, pd_variable **grads);
/* Installs optimizer.minimize for static Variables (optimizer_static.c). */
void pd_static_install_minimize(void);
/* Puts into scope, under the names minimize gave the accumulator Variables
 * of p, o's own accumulator tensors (created if o has not stepped yet), so
 * the Program's update ops and o's eager steps share one state. */
pd_status pd_static_share_optimizer_state(const pd_program *p, pd_optimizer *o, pd_var_scope *scope);

/* ---- lowering (lower.c) ------------------------------------------------------ */
/* Block 0 of p, for these feeds (their dtypes and shapes) and the values
 * in scope, as a program of registry ops only: the live ops (live[k]) are
 * recorded again on Variables of known shapes, each grad op replaced by
 * the ops of its backward rule traced with those shapes. Feeds and
 * persistable Variables keep their names; fetch_names[i] gets the name
 * (owned by *out) of fetch slot fetch[i]. */
pd_status pd_static_lower(const pd_program *p, const bool *live, const pd_static_feed *feed, int n_feed,
                          const int *fetch, int n_fetch, pd_var_scope *scope, pd_program **out,
                          const char **fetch_names);

/* With on, e runs programs as they are (grad ops run their rules on the
 * run's values) instead of lowering them: for tests. */
void pd_executor_set_interpret(pd_executor *e, bool on);
/* Whether lowered plans run in an arena (default on), and the bytes of the
 * last lowered plan's arena (0: none, e.g. interpreted). */
void pd_executor_set_arena(pd_executor *e, bool on);
size_t pd_executor_arena_bytes(const pd_executor *e);
/* The compile passes lowered plans get (NULL: all; passes.h), and what
 * they did to the last one (NULL when that run was interpreted). */
struct pd_pass_options;
struct pd_pass_stats;
void pd_executor_set_passes(pd_executor *e, const struct pd_pass_options *o);
const struct pd_pass_stats *pd_executor_pass_stats(const pd_executor *e);
/* Seconds the last lowering took, from its run's start to a plan ready to
 * run: the source program's plan, lowering, the passes and the arena's
 * layout and allocation (not the first touch of its pages, which the run
 * pays). -1 when that run was interpreted. For the bench. */
double pd_executor_compile_seconds(const pd_executor *e);
/* The program e's last run executed, lowered (NULL when that run was
 * interpreted): for tests. */
const pd_program *pd_executor_lowered_program(const pd_executor *e);

/* ---- control flow (control_flow.c) ------------------------------------------ */
/* Whether type names a control-flow or tensor array op (see above), or
 * the grad op of one ("<type>_grad"). */
bool pd_static_is_control_type(const char *type);
/* The kind of control or array op type names (PD_CTL_NONE: none); *grad:
 * whether it is the kind's grad op. */
pd_ctl_kind pd_static_control_kind(const char *type, bool *grad);
/* The type of a forward op of kind k (k not NONE). */
const char *pd_static_control_type(pd_ctl_kind k);
/* Runs control-flow op op of p: in holds its inputs (NULL for an absent
 * slot), out gets one new reference per output k with want[k] set. */
pd_status pd_static_run_control(const pd_program *p, const pd_operator *op, pd_tensor *const *in,
                                const bool *want, pd_tensor **out);
/* Appends to b the grad op ("<type>_grad") of control-flow or tensor
 * array op op: ins and outs laid out as for a registry grad op (see
 * pd_operator); it differentiates op on the tape (control_grad.c). */
pd_operator *pd_static_append_control_grad(pd_static_block *b, const pd_operator *op, const char *const *ins,
                                           const char *const *outs);
/* ---- tensor arrays (tensor_array.c) ------------------------------------------
 * An array's value at run time (and in eager mode) is a tensor whose
 * storage holds the list of its elements; no kernel reads it. Values the
 * executor passes around are never changed: a write makes a new one. */
bool pd_array_is_value(const pd_tensor *t);
/* A new array value of dtype dt holding items[0..n) (retained; items NULL
 * or a NULL entry: a slot never written). */
pd_tensor *pd_array_value_new(pd_dtype dt, pd_tensor *const *items, int n);
/* Sets slot k of array value t to x (retained; NULL: a hole), growing it
 * with holes up to k: only for a value nothing else has seen yet. */
pd_status pd_array_value_set(pd_tensor *t, int64_t k, pd_tensor *x);
int pd_array_value_len(const pd_tensor *t);
/* Element i (borrowed), NULL for a slot never written. */
pd_tensor *pd_array_value_item(const pd_tensor *t, int i);
/* Runs array op op on values in (see the PD_STATIC_*_ARRAY types). */
pd_status pd_static_run_array_op(const pd_operator *op, pd_tensor *const *in, pd_tensor **out);

/* ---- scopes (scope.c) ------------------------------------------------------ */
/* The scope runs use when given none: the scope_guard's or the global one. */
pd_var_scope *pd_static_current_scope(void);

#endif
