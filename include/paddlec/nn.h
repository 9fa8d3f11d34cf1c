/* paddle.nn: the layer base, parameters and their attributes, initializers.
 *
 * A layer is a struct whose first member is a pd_layer. A user layer (the
 * seed's LinearNet) looks like:
 *
 *   typedef struct { pd_layer base; pd_layer *linear1, *linear2; } linear_net;
 *   static int linear_net_forward(pd_layer *self, pd_tensor *const *in, int n_in,
 *                                 pd_tensor **out, int max_out) {
 *     linear_net *net = (linear_net *)self;
 *     out[0] = pd_layer_call1(net->linear2, pd_layer_call1(net->linear1, in[0]));
 *     return out[0] ? 1 : pd_last_status();
 *   }
 *   static const pd_layer_type linear_net_type = {"LinearNet", linear_net_forward};
 *   linear_net *net = pd_layer_new(sizeof *net, &linear_net_type);
 *   net->linear1 = pd_layer_add_sublayer(&net->base, "linear1", pd_nn_linear(10, 10, NULL));
 *   net->linear2 = pd_layer_add_sublayer(&net->base, "linear2", pd_nn_linear(10, 1, NULL));
 *
 * Forward functions run inside a scope that pd_layer_call opens: every
 * temporary they create is released when they return, and their outputs are
 * handed to the caller like an op's (to the caller's scope, if one is open). */
#ifndef PADDLEC_NN_H
#define PADDLEC_NN_H

#include "paddlec/core.h"
#include "paddlec/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- initializers (paddle.nn.initializer) ------------------------------- */
typedef enum pd_init_kind {
  PD_INIT_DEFAULT = 0, /* the layer's own default */
  PD_INIT_CONSTANT,
  PD_INIT_NORMAL,
  PD_INIT_TRUNCATED_NORMAL,
  PD_INIT_UNIFORM,
  PD_INIT_XAVIER_NORMAL,
  PD_INIT_XAVIER_UNIFORM,
  PD_INIT_KAIMING_NORMAL,
  PD_INIT_KAIMING_UNIFORM,
  PD_INIT_ASSIGN,
} pd_init_kind;

/* One initializer; build it with the pd_nn_initializer_* functions. */
typedef struct pd_initializer {
  pd_init_kind kind;
  double a, b;              /* value | mean, std | low, high | fan_in/fan_out overrides */
  double gain;              /* xavier gain, kaiming negative_slope */
  const char *nonlinearity; /* kaiming: "relu" (default), "leaky_relu", "tanh", ... */
  const pd_tensor *value;   /* assign: copied into the parameter (borrowed) */
  double lower, upper;      /* truncated normal: the cut-offs a, b (absolute values) */
} pd_initializer;

/* Constant(value). */
PD_API pd_initializer pd_nn_initializer_constant(double value);
/* Normal(mean, std): N(mean, std^2). */
PD_API pd_initializer pd_nn_initializer_normal(double mean, double std);
/* TruncatedNormal(mean, std, a, b): N(mean, std^2) restricted to [a, b];
 * a and b bound the value itself (Paddle's defaults: mean 0, std 1, a -2,
 * b 2). Drawn as Paddle's kernel does: the normal CDF inverted at a uniform
 * draw between CDF(a) and CDF(b), then clamped to [a, b]. a > b or std < 0
 * is an error. */
PD_API pd_initializer pd_nn_initializer_truncated_normal(double mean, double std, double a, double b);
/* Uniform(low, high): [low, high); low > high is an error. */
PD_API pd_initializer pd_nn_initializer_uniform(double low, double high);
/* XavierNormal / XavierUniform(fan_in, fan_out, gain): std
 * gain * sqrt(2 / (fan_in + fan_out)), limit gain * sqrt(6 / (fan_in +
 * fan_out)) (0 when a fan is 0). fan_in / fan_out of 0 mean "computed from
 * the shape" (Paddle's None); gain 0 means Paddle's default 1. */
PD_API pd_initializer pd_nn_initializer_xavier_normal(double fan_in, double fan_out, double gain);
PD_API pd_initializer pd_nn_initializer_xavier_uniform(double fan_in, double fan_out, double gain);
/* KaimingNormal / KaimingUniform(fan_in, negative_slope, nonlinearity): std
 * gain / sqrt(fan_in), limit gain * sqrt(3 / fan_in), gain as Paddle's
 * calculate_gain(nonlinearity, negative_slope): relu sqrt(2) (NULL means
 * Paddle's default "relu"), leaky_relu sqrt(2 / (1 + slope^2)), tanh 5/3,
 * selu 3/4, sigmoid, linear and conv* 1; any other name is an error. Paddle's
 * defaults: fan_in None (0), negative_slope 0. */
PD_API pd_initializer pd_nn_initializer_kaiming_normal(double fan_in, double negative_slope,
                                                       const char *nonlinearity);
PD_API pd_initializer pd_nn_initializer_kaiming_uniform(double fan_in, double negative_slope,
                                                        const char *nonlinearity);
/* Assign(value): copies value (converted to the parameter's dtype); its
 * shape must equal the parameter's. */
PD_API pd_initializer pd_nn_initializer_assign(const pd_tensor *value);
/* Fills t (no gradient recorded). Fans as Paddle computes them: a 2-D
 * [in, out] weight has fan_in = in, fan_out = out; higher ranks
 * [out, in, k...] use in * prod(k) and out * prod(k); 1-D [n] uses n for
 * both, 0-D 1. Random initializers draw from the global generator (pd_seed). */
PD_API pd_status pd_initializer_apply(const pd_initializer *init, pd_tensor *t);

/* ---- parameter attributes (paddle.ParamAttr) --------------------------- */
typedef struct pd_param_attr {
  const char *name;                  /* NULL: generated ("linear_0.w_0") */
  const pd_initializer *initializer; /* NULL: the layer's default */
  double learning_rate;              /* multiplier of the optimizer's rate; 0 means 1.0 */
  bool not_trainable;                /* trainable=False: stop_gradient, skipped by optimizers */
  bool no_clip;                      /* need_clip=False */
  double l2_decay, l1_decay;         /* per-parameter regularizer coefficients (0: none) */
} pd_param_attr;

/* What a parameter carries besides its data (read by optimizers). */
typedef struct pd_param_info {
  double learning_rate;
  bool trainable, need_clip;
  double l2_decay, l1_decay;
} pd_param_info;
/* NULL when t is not a parameter. */
PD_API const pd_param_info *pd_tensor_param_info(const pd_tensor *t);

/* ---- the layer base ---------------------------------------------------- */
typedef struct pd_layer pd_layer;

/* ---- keyword arguments of a layer call ----------------------------------
 * Paddle's forward(x, position_ids=None, attention_mask=None) and
 * RotaryEmbedding.forward(x, seq_len): optional tensors (None included) and
 * plain values travel by name beside the positional tensors. A caller
 * writes
 *
 *   pd_tensor *out[1];
 *   int n = pd_layer_call_kw(attn, (pd_tensor *[]){x}, 1,
 *                            PD_KWARGS(PD_KW_NONE("position_ids"),
 *                                      PD_KW_TENSOR("attention_mask", mask)),
 *                            out, 1);
 *   pd_tensor *y = pd_layer_call1_kw(rotary, x, PD_KWARGS(PD_KW_INT("seq_len", 16)));
 *
 * The layer names the keywords it takes when it is built, and its forward
 * (the usual signature) reads them for the call running:
 *
 *   static const char *const attn_kw[] = {"position_ids", "attention_mask"};
 *   pd_layer_declare_kwargs(&attn->base, attn_kw, 2);        // in the constructor
 *
 *   static int attn_forward(pd_layer *self, pd_tensor *const *in, int n_in,
 *                           pd_tensor **out, int max_out) {
 *     const pd_kwargs *kw = pd_layer_kwargs(self);
 *     pd_tensor *pos, *mask;                  // NULL when None or not given
 *     pd_status st = pd_kwargs_tensor(kw, "position_ids", &pos);
 *     if (st == PD_OK) st = pd_kwargs_tensor(kw, "attention_mask", &mask);
 *     if (st != PD_OK) return st;
 *     ...
 *   }
 *
 * Tensors are borrowed for the call. PD_KW_TENSOR with a NULL tensor is the
 * failed op that produced it (its error is returned, as a NULL positional
 * input's is); write PD_KW_NONE for None. A keyword the layer did not
 * declare, or one given twice, is an error naming the layer and the keyword
 * (Paddle's "forward() got an unexpected keyword argument"). DataParallel
 * takes any keyword and passes them on to the layer it wraps. Forward
 * pre/post hooks see the positional tensors. */
typedef enum pd_arg_kind {
  PD_ARG_NONE = 0,
  PD_ARG_TENSOR,
  PD_ARG_INT,
  PD_ARG_FLOAT,
  PD_ARG_BOOL,
  PD_ARG_STRING
} pd_arg_kind;
typedef struct pd_arg {
  const char *name;
  pd_arg_kind kind;
  pd_tensor *tensor; /* PD_ARG_TENSOR (borrowed) */
  int64_t i;         /* PD_ARG_INT, PD_ARG_BOOL (0 / 1) */
  double f;          /* PD_ARG_FLOAT */
  const char *s;     /* PD_ARG_STRING (borrowed) */
} pd_arg;
typedef struct pd_kwargs {
  int n;
  const pd_arg *args;
} pd_kwargs;
#define PD_KW_NONE(nm) ((pd_arg){.name = (nm), .kind = PD_ARG_NONE})
#define PD_KW_TENSOR(nm, t) ((pd_arg){.name = (nm), .kind = PD_ARG_TENSOR, .tensor = (t)})
#define PD_KW_INT(nm, v) ((pd_arg){.name = (nm), .kind = PD_ARG_INT, .i = (v)})
#define PD_KW_FLOAT(nm, v) ((pd_arg){.name = (nm), .kind = PD_ARG_FLOAT, .f = (v)})
#define PD_KW_BOOL(nm, v) ((pd_arg){.name = (nm), .kind = PD_ARG_BOOL, .i = (v) ? 1 : 0})
#define PD_KW_STRING(nm, v) ((pd_arg){.name = (nm), .kind = PD_ARG_STRING, .s = (v)})
/* A pointer to a pd_kwargs holding the given PD_KW_* entries. */
#define PD_KWARGS(...)                                                               \
  (&(const pd_kwargs){(int)(sizeof((const pd_arg[]){__VA_ARGS__}) / sizeof(pd_arg)), \
                      (const pd_arg[]){__VA_ARGS__}})

/* Reading keywords (from pd_layer_kwargs). Each returns PD_OK with the
 * default (or NULL) when the name is absent; a keyword given with another
 * kind is PD_ERR_INVALID naming it (an int is accepted where a float is
 * read). pd_kwargs_tensor gives NULL for None. */
PD_API bool pd_kwargs_has(const pd_kwargs *kw, const char *name);
PD_API pd_status pd_kwargs_tensor(const pd_kwargs *kw, const char *name, pd_tensor **out);
PD_API pd_status pd_kwargs_int(const pd_kwargs *kw, const char *name, int64_t def, int64_t *out);
PD_API pd_status pd_kwargs_float(const pd_kwargs *kw, const char *name, double def, double *out);
PD_API pd_status pd_kwargs_bool(const pd_kwargs *kw, const char *name, bool def, bool *out);
PD_API pd_status pd_kwargs_string(const pd_kwargs *kw, const char *name, const char *def, const char **out);

typedef struct pd_layer_type {
  const char *name; /* class name: "Linear", "LinearNet" */
  /* Writes up to max_out outputs (new references or tensors created by ops in
   * this call); returns how many, or a negative status. */
  int (*forward)(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out);
  /* Frees what the subtype added (optional; sublayers and parameters
   * registered with the base are released by the base). */
  void (*destroy)(pd_layer *self);
  /* "in_features=10, out_features=1" for printing (malloc'ed; optional). */
  char *(*extra_repr)(const pd_layer *self);
} pd_layer_type;

/* Opaque bookkeeping of the base (parameters, buffers, sublayers, hooks). */
typedef struct pd_layer_state pd_layer_state;

struct pd_layer {
  const pd_layer_type *type;
  pd_layer_state *st;
  bool training;
};

/* A new layer of `size` bytes (>= sizeof(pd_layer), zeroed) whose base is
 * initialised; refcount 1. Returns the struct (cast to the subtype). */
PD_API void *pd_layer_new(size_t size, const pd_layer_type *type);
PD_API pd_layer *pd_layer_retain(pd_layer *l);
/* Drops one reference; the last one destroys the layer, its parameters,
 * buffers and sublayer references. NULL is a no-op. */
PD_API void pd_layer_release(pd_layer *l);

/* layer(*inputs): pre-hooks, forward, post-hooks. */
PD_API int pd_layer_call(pd_layer *l, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out);
/* One tensor in, the first output back (NULL on error). */
PD_API pd_tensor *pd_layer_call1(pd_layer *l, pd_tensor *x);
/* layer(*inputs, **kw): the same with keyword arguments (kw NULL: none). */
PD_API int pd_layer_call_kw(pd_layer *l, pd_tensor *const *in, int n_in, const pd_kwargs *kw, pd_tensor **out,
                            int max_out);
PD_API pd_tensor *pd_layer_call1_kw(pd_layer *l, pd_tensor *x, const pd_kwargs *kw);
/* The keywords l's forward accepts (copied): names[0..n); n = -1 accepts
 * any (a wrapper passing them on). A new declaration replaces the old. */
PD_API pd_status pd_layer_declare_kwargs(pd_layer *l, const char *const *names, int n);
/* In l's forward: the keyword arguments of the call running it on this
 * thread (never NULL; empty outside a call or for a call without any). */
PD_API const pd_kwargs *pd_layer_kwargs(const pd_layer *l);

/* Registers `sub` under `name`, taking over the caller's reference; returns
 * sub (NULL, and sub released, on error). Replaces a sublayer of that name. */
PD_API pd_layer *pd_layer_add_sublayer(pd_layer *l, const char *name, pd_layer *sub);
/* Removes sublayer `name` and hands its reference to the caller; its
 * parameters and buffers leave l's named lists and state dict. The other
 * sublayers keep their order. NULL, with an error naming `name`, when l has
 * no sublayer of that name. */
PD_API pd_layer *pd_layer_remove_sublayer(pd_layer *l, const char *name);
/* create_parameter: a new parameter of the given shape, initialised with
 * attr->initializer or default_init (Xavier-uniform when NULL and not bias,
 * zeros when bias), registered under `name`. Borrowed (the layer owns it).
 * dt = PD_NUM_DTYPES: paddle.get_default_dtype() (pd_get_default_dtype). */
PD_API pd_tensor *pd_layer_create_parameter(pd_layer *l, const char *name, int ndim, const int64_t *shape,
                                            pd_dtype dt, const pd_param_attr *attr,
                                            const pd_initializer *default_init, bool is_bias);
/* add_parameter: registers an existing tensor as parameter `name` (retains it;
 * stop_gradient becomes False). Replaces a parameter of that name. */
PD_API pd_status pd_layer_add_parameter(pd_layer *l, const char *name, pd_tensor *param);
/* register_buffer(name, buf, persistable): a tensor the layer holds that is
 * not a parameter (no gradient, not trained). The layer retains buf (release
 * your reference); NULL removes the buffer. persistable buffers go into
 * state_dict and checkpoints; persistable=false ones (Paddle's
 * register_buffer(..., persistable=False)) do not, but are listed by
 * named_buffers and converted by pd_layer_to. The seed's RotaryEmbedding
 * keeps its tables this way:
 *
 *   typedef struct { pd_layer base; int64_t dim; } rotary;
 *   rotary *r = pd_layer_new(sizeof *r, &rotary_type);
 *   pd_tensor *cos = ..., *sin = ...;          // [max_position, dim]
 *   pd_layer_register_buffer(&r->base, "cos_cached", cos, false);
 *   pd_layer_register_buffer(&r->base, "sin_cached", sin, false);
 *   pd_tensor_release(cos);
 *   pd_tensor_release(sin);
 *   // in forward: borrowed, owned by the layer
 *   pd_tensor *c = pd_layer_buffer(self, "cos_cached");
 *
 * Look a buffer up by name in forward rather than caching the pointer in the
 * struct if the buffer may be replaced (registering a name again replaces
 * it). */
PD_API pd_status pd_layer_register_buffer(pd_layer *l, const char *name, pd_tensor *buf, bool persistable);

/* Lookups by direct name (borrowed; NULL when absent). */
PD_API pd_tensor *pd_layer_parameter(const pd_layer *l, const char *name);
PD_API pd_tensor *pd_layer_buffer(const pd_layer *l, const char *name);
PD_API pd_layer *pd_layer_sublayer(const pd_layer *l, const char *name);
/* full_name(): "linear_0" — the type name in snake case and a per-type counter. */
PD_API const char *pd_layer_full_name(const pd_layer *l);

/* A list of named tensors or layers (borrowed pointers; names owned by the list). */
typedef struct pd_named_tensors {
  int n;
  char **names;
  pd_tensor **tensors;
} pd_named_tensors;
typedef struct pd_named_layers {
  int n;
  char **names;
  pd_layer **layers;
} pd_named_layers;
PD_API void pd_named_tensors_free(pd_named_tensors *list);
PD_API void pd_named_layers_free(pd_named_layers *list);

/* named_parameters(): dotted names ("linear1.weight") in registration order,
 * sublayers depth-first, each parameter once. */
PD_API pd_status pd_layer_named_parameters(const pd_layer *l, pd_named_tensors *out);
/* parameters(): the same tensors; names are filled too. */
PD_API pd_status pd_layer_parameters(const pd_layer *l, pd_named_tensors *out);
/* named_buffers(): every buffer, persistable or not, by dotted name: l's own
 * in registration order, then each sublayer's depth-first; each tensor once. */
PD_API pd_status pd_layer_named_buffers(const pd_layer *l, pd_named_tensors *out);
/* named_parameters(prefix, include_sublayers) / named_buffers(prefix,
 * include_sublayers): the same lists with every name under `prefix` (NULL
 * or "": none) and, without include_sublayers, only l's own entries. */
PD_API pd_status pd_layer_named_parameters_with_prefix(const pd_layer *l, const char *prefix,
                                                       bool include_sublayers, pd_named_tensors *out);
PD_API pd_status pd_layer_named_buffers_with_prefix(const pd_layer *l, const char *prefix,
                                                    bool include_sublayers, pd_named_tensors *out);
/* named_sublayers(): every descendant with its dotted path (not l itself). */
PD_API pd_status pd_layer_named_sublayers(const pd_layer *l, pd_named_layers *out);

/* state_dict(): parameters and persistable buffers by structured name: per
 * layer its parameters, then its persistable buffers, then its sublayers'
 * entries. As in Paddle, a tensor reached by several paths (shared by two
 * layers, or held by a layer and its sublayer as LSTM's weights are) is
 * listed under each of them. */
PD_API pd_status pd_layer_state_dict(const pd_layer *l, pd_named_tensors *out);
/* set_state_dict(): copies matching entries into the layer's tensors
 * (shapes must match; dtypes are converted). Names the layer has but sd
 * lacks go to *missing, names sd has but the layer lacks to *unexpected
 * (either may be NULL). A name whose tensor sd holds under another of its
 * names is not missing: the tensor was loaded. A shape mismatch is an error
 * naming both shapes, and changes nothing. */
PD_API pd_status pd_layer_set_state_dict(pd_layer *l, const pd_named_tensors *sd, pd_named_tensors *missing,
                                         pd_named_tensors *unexpected);
/* The *missing and *unexpected lists set_state_dict(sd) would give,
 * without changing the layer (for strict loading). */
PD_API pd_status pd_layer_match_state_dict(const pd_layer *l, const pd_named_tensors *sd,
                                           pd_named_tensors *missing, pd_named_tensors *unexpected);

/* Layer.to(dtype=dt) / Layer.astype(dt): every parameter and buffer of l
 * and its sublayers, persistable or not, converted to dt in place (as
 * Paddle's to(), not only the floating ones): the tensors stay the same
 * objects, so pointers a layer keeps (linear->weight) and pd_layer_buffer
 * lookups see the new dtype. Converted parameters lose their gradient.
 * Convert before creating an optimizer or DataParallel on the layer: their
 * state was built for the old dtype. A non-floating dt for a layer with
 * parameters is PD_ERR_DTYPE naming the first one, and nothing changes. */
PD_API pd_status pd_layer_to(pd_layer *l, pd_dtype dt);
PD_API pd_status pd_layer_astype(pd_layer *l, pd_dtype dt);
/* Tensor.astype(dt): pd_cast (a new tensor; gradients flow back). */
PD_API pd_tensor *pd_tensor_astype(pd_tensor *x, pd_dtype dt);

/* train() / eval(): set the flag on l and every sublayer. */
PD_API void pd_layer_train(pd_layer *l);
PD_API void pd_layer_eval(pd_layer *l);
/* apply(fn): as Paddle, apply(fn) on each direct sublayer in registration
 * order (so each subtree children first), then fn on l itself. */
PD_API void pd_layer_apply(pd_layer *l, void (*fn)(pd_layer *layer, void *user), void *user);
/* clear_gradients(set_to_zero) on every parameter. */
PD_API void pd_layer_clear_gradients(pd_layer *l, bool set_to_zero);

/* Forward hooks. A pre-hook may replace the inputs (write new tensors into
 * in[], return 1) or leave them (return 0); a post-hook may replace outputs
 * the same way. Return value of register: hook id > 0, or negative status. */
typedef int (*pd_forward_pre_hook_fn)(pd_layer *l, pd_tensor **in, int n_in, void *user);
typedef int (*pd_forward_post_hook_fn)(pd_layer *l, pd_tensor *const *in, int n_in, pd_tensor **out,
                                       int n_out, void *user);
PD_API int pd_layer_register_forward_pre_hook(pd_layer *l, pd_forward_pre_hook_fn fn, void *user);
PD_API int pd_layer_register_forward_post_hook(pd_layer *l, pd_forward_post_hook_fn fn, void *user);
PD_API pd_status pd_layer_remove_hook(pd_layer *l, int id);

/* print(layer): Paddle's repr, e.g.
 *   LinearNet(
 *     (linear1): Linear(in_features=10, out_features=10, dtype=float32)
 *   )
 * malloc'ed; the caller frees. */
PD_API char *pd_layer_to_string(const pd_layer *l);

/* Deprecated names, kept for one release (docs/architecture.md, "Names"). */
#define pd_layer_named_parameters_ex pd_layer_named_parameters_with_prefix
#define pd_layer_named_buffers_ex pd_layer_named_buffers_with_prefix

#ifdef __cplusplus
}
#endif
#endif
