/* The one dispatcher. Every op runs through pd_dispatch:
 *   NULL/error propagation -> dtype conversion (promotion, half via float32)
 *   -> DTensor handler -> infer_meta -> tracer (record) -> allocate outputs
 *   -> kernel -> inplace version bump -> autograd node -> scope tracking. */
#include <string.h>

#include "../core/shape_check.h"
#include "../core/thread_governor.h"
#include "op_registry.h"

static pd_autograd_record_fn g_autograd;

/* What this thread's dispatches consult, in one thread-local block so the
 * hot path finds grad mode and both hooks with one TLS lookup. A new thread
 * (a DataLoader worker) starts with grad on and no hooks: it never records
 * into another thread's Program or reshards another thread's DTensors.
 * `hooked` says whether either hook is set, so an eager op tests one flag
 * and runs a copy of the dispatcher without the hooks' code. */
static _Thread_local struct {
  bool no_grad;
  bool hooked;
  pd_tracer_fn tracer;
  void *tracer_ctx;
  pd_dist_fn dist;
  void *dist_ctx;
  pd_dist_place_as_fn place_as; /* not on the hot path: `hooked` ignores it */
  int dist_suspended;           /* pd_dispatch_suspend_dist's depth */
} t_ctx;

atomic_bool pd_g_dtensors_made;

void pd_dispatch_set_autograd(pd_autograd_record_fn fn) { g_autograd = fn; }
pd_autograd_record_fn pd_dispatch_get_autograd(void) { return g_autograd; }
void pd_dispatch_set_tracer(pd_tracer_fn fn, void *ctx) {
  t_ctx.tracer = fn;
  t_ctx.tracer_ctx = fn ? ctx : NULL;
  t_ctx.hooked = t_ctx.tracer || t_ctx.dist;
}
pd_tracer_fn pd_dispatch_get_tracer(void **ctx) {
  if (ctx) *ctx = t_ctx.tracer_ctx;
  return t_ctx.tracer;
}
void pd_dispatch_set_dist(pd_dist_fn fn, void *ctx) {
  t_ctx.dist = fn;
  t_ctx.dist_ctx = fn ? ctx : NULL;
  t_ctx.hooked = t_ctx.tracer || t_ctx.dist;
}
pd_dist_fn pd_dispatch_get_dist(void **ctx) {
  if (ctx) *ctx = t_ctx.dist_ctx;
  return t_ctx.dist;
}
pd_dist_fn pd_dispatch_suspend_dist(void **ctx) {
  pd_dist_fn fn = pd_dispatch_get_dist(ctx);
  pd_dispatch_set_dist(NULL, NULL);
  t_ctx.dist_suspended++;
  return fn;
}
void pd_dispatch_resume_dist(pd_dist_fn fn, void *ctx) {
  t_ctx.dist_suspended--;
  pd_dispatch_set_dist(fn, ctx);
}

/* An input that is a DTensor on a thread without the DTensor handler (see
 * op_registry.h): an error naming the op, else PD_OK. */
static __attribute__((noinline)) pd_status refuse_foreign_dtensor(const pd_op_def *def, pd_tensor *const *in,
                                                                  int n_in) {
  if (t_ctx.dist || t_ctx.dist_suspended) return PD_OK;
  for (int i = 0; i < n_in; i++)
    if (in[i] && in[i]->dist_attr && !in[i]->is_meta)
      return pd_set_error(PD_ERR_STATE,
                          "%s: input %d is a distributed tensor (DTensor) made on another thread; ops on "
                          "DTensors run on the thread that made them (their collectives must come in the "
                          "same order on every rank), so pass this thread its local part "
                          "(pd_dist_local_value) or run the op there",
                          def->name, i);
  return PD_OK;
}
static inline pd_status check_foreign_dtensor(const pd_op_def *def, pd_tensor *const *in, int n_in) {
  if (__builtin_expect(atomic_load_explicit(&pd_g_dtensors_made, memory_order_relaxed), 0))
    return refuse_foreign_dtensor(def, in, n_in);
  return PD_OK;
}
void pd_dispatch_set_dist_place_as(pd_dist_place_as_fn fn) { t_ctx.place_as = fn; }
pd_dist_place_as_fn pd_dispatch_get_dist_place_as(void) { return t_ctx.place_as; }

const pd_op_def *const pd_op_table[PD_NUM_OPS] = {
#define PD_OP(name) &pd_opdef_##name,
#include "ops.def"
#undef PD_OP
};

int pd_op_find(const char *name) {
  if (!name) return -1;
  for (int i = 0; i < PD_NUM_OPS; i++)
    if (strcmp(pd_op_table[i]->name, name) == 0) return i;
  return -1;
}

PD_NO_LIBCALLS void pd_meta_of(const pd_tensor *t, pd_meta *m) {
  m->dtype = t->dtype;
  m->ndim = t->ndim;
  for (int d = 0; d < t->ndim; d++) m->shape[d] = t->shape[d];
}

pd_status pd_norm_axis(const char *op, int64_t axis, int ndim, int *out) {
  int64_t lim = ndim > 0 ? ndim : 1;
  if (axis < -lim || axis >= lim)
    return pd_set_error(PD_ERR_INDEX,
                        "%s: axis %lld is out of range for a tensor of rank %d "
                        "(expected -%lld <= axis < %lld)",
                        op, (long long)axis, ndim, (long long)lim, (long long)lim);
  *out = (int)(axis < 0 ? axis + lim : axis);
  return PD_OK;
}

pd_status pd_broadcast_shapes(const char *op, int na, const int64_t *a, int nb, const int64_t *b, int *nout,
                              int64_t *out) {
  int n = na > nb ? na : nb;
  for (int i = 0; i < n; i++) {
    int64_t da = i < n - na ? 1 : a[i - (n - na)];
    int64_t db = i < n - nb ? 1 : b[i - (n - nb)];
    if (!pd_broadcast_dim(da, db, &out[i])) {
      char sa[160], sb[160];
      return pd_set_error(PD_ERR_SHAPE, "%s: shapes %s and %s cannot be broadcast (dim %d: %lld vs %lld)", op,
                          pd_shape_str(na, a, sa, sizeof sa), pd_shape_str(nb, b, sb, sizeof sb), i,
                          (long long)da, (long long)db);
    }
  }
  *nout = n;
  return PD_OK;
}

pd_status pd_check_inplace_target(const char *op, const pd_tensor *x) {
  if (x->is_contiguous || x->numel == 0) return PD_OK;
  for (int d = 0; d < x->ndim; d++)
    if (x->shape[d] > 1 && x->strides[d] == 0) {
      char st[160];
      return pd_set_error(PD_ERR_INVALID,
                          "%s: x of shape %s is a broadcast view (strides %s: dim %d has stride 0, so its "
                          "elements share memory) and cannot be modified inplace; make a copy first "
                          "(pd_contiguous or the out-of-place op)",
                          op, PD_SHAPE_STR(x), pd_shape_str(x->ndim, x->strides, st, sizeof st), d);
    }
  return PD_OK;
}

/* Replaces inputs by casts where the op's flags ask for another dtype.
 * Returns the dtype outputs go back to (PD_NUM_DTYPES: keep as computed). */
static pd_status convert_inputs(const pd_op_def *def, pd_tensor *const *in, int n_in, pd_tensor **conv,
                                pd_dtype *restore) {
  *restore = PD_NUM_DTYPES;
  for (int i = 0; i < n_in; i++) conv[i] = NULL;
  pd_dtype common = PD_NUM_DTYPES;
  if (def->flags & PD_OPF_PROMOTE) {
    common = in[0]->dtype;
    for (int i = 1; i < n_in; i++) {
      pd_dtype c = pd_promote_types(common, in[i]->dtype);
      if (c == PD_NUM_DTYPES)
        return pd_set_error(PD_ERR_DTYPE,
                            "%s: input 0 is %s and input %d is %s; Paddle promotes only between "
                            "floating dtypes, so cast one of them first",
                            def->name, pd_dtype_name(in[0]->dtype), i, pd_dtype_name(in[i]->dtype));
      common = c;
    }
  }
  for (int i = 0; i < n_in; i++) {
    pd_dtype want = common != PD_NUM_DTYPES ? common : in[i]->dtype;
    if ((def->flags & PD_OPF_FLOAT_ONLY) && !pd_dtype_is_floating(want)) want = PD_FLOAT32;
    if ((def->flags & PD_OPF_HALF_VIA_F32) && (want == PD_FLOAT16 || want == PD_BFLOAT16)) {
      *restore = want;
      want = PD_FLOAT32;
    }
    if (want != in[i]->dtype) {
      pd_attrs ca = {.dtype = want};
      conv[i] = pd_dispatch1(PD_OP_cast, &in[i], 1, &ca);
      if (!conv[i]) return pd_last_status();
    }
  }
  return PD_OK;
}

/* The core of dispatch, on inputs already in the dtype the kernel takes.
 * `hooked` (a constant where it is inlined) is t_ctx.hooked: false gives the
 * eager copy, which has no tracer or DTensor code. */
static inline __attribute__((always_inline)) pd_status run(pd_op_id id, pd_tensor *const *in, int n_in,
                                                           const pd_attrs *a, pd_tensor **out, int *n_out,
                                                           bool hooked) {
  const pd_op_def *def = pd_op_table[id];
  pd_meta meta[PD_MAX_OUTPUTS];
  int nm = def->n_out;
  pd_status st;
  /* DTensor inputs: the handler checks the op on the global metas first
   * (the local shards' shapes need not satisfy it), then runs it on them. */
  if (hooked && t_ctx.dist)
    for (int i = 0; i < n_in; i++)
      if (in[i]->dist_attr) {
        if (t_ctx.dist(t_ctx.dist_ctx, id, in, n_in, a, out, n_out, &st)) return st;
        break;
      }
  if (__builtin_expect(def->flags & PD_OPF_INPLACE, 0) && !(def->flags & PD_OPF_GEOMETRY) &&
      (st = pd_check_inplace_target(def->name, in[0])) != PD_OK)
    return st;
  st = def->infer_meta(def, in, n_in, a, meta, &nm);
  if (st != PD_OK) return st;
  if (nm < 0 || nm > PD_MAX_OUTPUTS)
    return pd_set_error(PD_ERR_INVALID, "%s: %d outputs (at most %d)", def->name, nm, PD_MAX_OUTPUTS);
  /* An output shape whose size overflows int64 is this op's error, whether
   * the output is a view (an expand claims elements its storage does not
   * hold) or only recorded. Outputs allocated below are checked by tensor
   * creation (the error then gets this op's name as a prefix), so the
   * common path does not check twice. */
  pd_tracer_fn tracer = hooked ? t_ctx.tracer : NULL;
  if ((def->flags & (PD_OPF_VIEW | PD_OPF_INPLACE)) || tracer)
    for (int k = 0; k < nm; k++) {
      st = pd_shape_check(def->name, meta[k].dtype, meta[k].ndim, meta[k].shape, tracer != NULL);
      if (st != PD_OK) return st;
    }

  if (tracer) {
    if (tracer(t_ctx.tracer_ctx, id, in, n_in, a, meta, out, nm, 0)) {
      if (nm > 0 && !out[0]) return pd_last_status(); /* the tracer failed: its error */
      *n_out = nm;
      return PD_OK;
    }
    for (int i = 0; i < n_in; i++) /* a kernel never sees a tensor without data */
      if (in[i]->is_meta)
        return pd_set_error(PD_ERR_STATE,
                            "%s: input %d is a static Variable (shape %s) with no data and the tracer "
                            "installed on this thread did not record the op",
                            def->name, i, PD_SHAPE_STR(in[i]));
  }

  pd_place_kind place = n_in > 0 ? in[0]->place.kind : PD_PLACE_CPU;
  pd_kernel_fn kernel = def->kernel[place];
  if (!kernel) return pd_set_error(PD_ERR_UNIMPLEMENTED, "%s: no kernel for place %d", def->name, (int)place);

  unsigned flags = def->flags;
  bool inplace = flags & PD_OPF_INPLACE;
  bool record = false;
  if ((flags & PD_OPF_DIFF) && g_autograd && !t_ctx.no_grad)
    for (int i = 0; i < n_in; i++) record |= !in[i]->stop_gradient;
  if (inplace && record && !in[0]->grad_fn && !in[0]->stop_gradient)
    return pd_set_error(PD_ERR_STATE,
                        "%s: a leaf tensor that needs a gradient (stop_gradient=False) "
                        "cannot be modified inplace",
                        def->name);

  if (!(flags & (PD_OPF_VIEW | PD_OPF_INPLACE))) { /* fresh outputs from the metas */
    for (int k = 0; k < nm; k++) {
      out[k] = pd_tensor_new_untracked(meta[k].dtype, meta[k].ndim, meta[k].shape);
      if (!out[k]) { /* the allocator's message names bytes only: add the op and the shape */
        char sh[160];
        pd_error_prefix("%s: output %d (%s of shape %s)", def->name, k, pd_dtype_name(meta[k].dtype),
                        pd_shape_str(meta[k].ndim, meta[k].shape, sh, sizeof sh));
        st = pd_last_status();
        for (int j = 0; j < k; j++) pd_tensor_release(out[j]);
        return st;
      }
      if (place != PD_PLACE_CPU) out[k]->place = in[0]->place; /* new tensors are CPU */
    }
  } else {
    out[0] = NULL; /* the failure path releases what exists */
    for (int k = 1; k < nm; k++) out[k] = NULL;
    if (inplace) out[0] = pd_tensor_retain(in[0]);
  }
  pd_thread_governor_poke();
  const pd_kernel_ctx kc = {def, in, n_in, a, meta, out, nm};
  st = kernel(&kc);
  if (st != PD_OK) goto fail;
  if (inplace) in[0]->storage->version++;
  if (tracer) tracer(t_ctx.tracer_ctx, id, in, n_in, a, meta, out, nm, 1);
  if (record) {
    st = g_autograd(id, in, n_in, a, out, nm);
    if (st != PD_OK) goto fail;
  }
  *n_out = nm;
  return PD_OK;
fail:
  for (int k = 0; k < nm; k++) pd_tensor_release(out[k]);
  return st;
}

/* run whatever this thread has installed: the copy for a thread with a
 * tracer or DTensor handler, and for the uncommon paths. */
static __attribute__((noinline)) pd_status run_general(pd_op_id id, pd_tensor *const *in, int n_in,
                                                       const pd_attrs *a, pd_tensor **out, int *n_out) {
  return run(id, in, n_in, a, out, n_out, true);
}

/* Cheap test before convert_inputs: the common case is one float dtype. */
static bool needs_conversion(const pd_op_def *def, pd_tensor *const *in, int n_in) {
  pd_dtype d0 = in[0]->dtype;
  bool same = true;
  for (int i = 1; i < n_in; i++) same &= in[i]->dtype == d0;
  if (same && (d0 == PD_FLOAT32 || d0 == PD_FLOAT64)) return false; /* the common case */
  for (int i = 0; i < n_in; i++) {
    pd_dtype d = in[i]->dtype;
    if ((def->flags & PD_OPF_PROMOTE) && d != d0) return true;
    if ((def->flags & PD_OPF_FLOAT_ONLY) && !pd_dtype_is_floating(d)) return true;
    if ((def->flags & PD_OPF_HALF_VIA_F32) && (d == PD_FLOAT16 || d == PD_BFLOAT16)) return true;
  }
  return false;
}

/* A static Variable reaches an op while no Program is being built. */
static pd_status meta_without_tracer(const pd_op_def *def, pd_tensor *const *in, int n_in) {
  int i = 0;
  while (i < n_in - 1 && !in[i]->is_meta) i++;
  return pd_set_error(PD_ERR_STATE,
                      "%s: input %d (%s%s%s, shape %s) is a static Variable with no data; ops on it can only "
                      "be recorded into a Program (under program_guard), and no tracer is installed on this "
                      "thread",
                      def->name, i, in[i]->name ? "'" : "", in[i]->name ? in[i]->name : "unnamed",
                      in[i]->name ? "'" : "", PD_SHAPE_STR(in[i]));
}

/* Casts each float32 output back to `dtype` (the half dtype the inputs had
 * before convert_inputs computed them in float32). On failure every output
 * is released and *n_out is 0. */
static pd_status cast_outputs_back(pd_tensor **out, int *n_out, pd_dtype dtype) {
  pd_attrs ca = {.dtype = dtype};
  for (int k = 0; k < *n_out; k++) {
    if (out[k]->dtype != PD_FLOAT32) continue;
    pd_tensor *c = pd_dispatch1(PD_OP_cast, &out[k], 1, &ca);
    if (!c) {
      pd_status st = pd_last_status();
      for (int j = 0; j < *n_out; j++) pd_tensor_release(out[j]);
      *n_out = 0;
      return st;
    }
    pd_tensor_release(out[k]);
    out[k] = c;
  }
  return PD_OK;
}

/* The uncommon path: inputs whose dtypes the op's flags ask to change
 * (promotion, integers to float, half via float32). Runs the op on the
 * converted inputs, then casts half results back. */
static pd_status run_converted(pd_op_id id, pd_tensor *const *in, int n_in, const pd_attrs *a,
                               pd_tensor **out, int *n_out) {
  const pd_op_def *def = pd_op_table[id];
  if (n_in > PD_MAX_OUTPUTS) return pd_set_error(PD_ERR_INVALID, "%s: too many inputs (%d)", def->name, n_in);
  pd_tensor *conv[PD_MAX_OUTPUTS];
  pd_dtype restore;
  pd_status st = convert_inputs(def, in, n_in, conv, &restore);
  bool converted = false;
  for (int i = 0; i < n_in; i++) converted |= conv[i] != NULL;
  if (st == PD_OK && !converted)
    return run_general(id, in, n_in, a, out, n_out); /* nothing changed after all */
  if (st == PD_OK && (def->flags & PD_OPF_INPLACE))
    st = pd_set_error(PD_ERR_DTYPE, "%s: an inplace op cannot change the dtype of x (%s)", def->name,
                      pd_dtype_name(in[0]->dtype));
  if (st == PD_OK) {
    pd_tensor *use[PD_MAX_OUTPUTS];
    for (int i = 0; i < n_in; i++) use[i] = conv[i] ? conv[i] : in[i];
    st = run_general(id, use, n_in, a, out, n_out);
  }
  for (int i = 0; i < n_in; i++) pd_tensor_release(conv[i]);
  if (st == PD_OK && restore != PD_NUM_DTYPES) st = cast_outputs_back(out, n_out, restore);
  return st;
}

/* The inputs' checks: none NULL, none released, and a static Variable only
 * while a tracer records. */
static pd_status check_inputs(const pd_op_def *def, pd_tensor *const *in, int n_in) {
  bool any_meta = false;
  for (int i = 0; i < n_in; i++) {
    if (!in[i]) {
      if (pd_last_status() != PD_OK) return pd_last_status(); /* keep the first error */
      return pd_set_error(PD_ERR_INVALID, "%s: input %d is NULL", def->name, i);
    }
    if (atomic_load_explicit(&in[i]->refcount, memory_order_relaxed) <= 0 &&
        !pd_tensor_check_live(in[i], def->name))
      return pd_last_status(); /* a released tensor (see PD_REFCOUNT_FREED) */
    any_meta |= in[i]->is_meta;
  }
  if (any_meta && !t_ctx.tracer) return meta_without_tracer(def, in, n_in);
  return PD_OK;
}

/* Checks the inputs, then runs the op (converting dtypes first when its
 * flags ask). With `track`, outputs handed to the user join the innermost
 * scope. Inlined into pd_dispatch1, the entry of most ops; the other entries
 * share dispatch_general. */
static inline __attribute__((always_inline)) pd_status dispatch_impl(pd_op_id id, pd_tensor *const *in,
                                                                     int n_in, const pd_attrs *a,
                                                                     pd_tensor **out, int *n_out,
                                                                     bool track) {
  const pd_op_def *def = pd_op_table[id];
  *n_out = 0;
  /* one branch per input for the common case: live tensors with data */
  int ok = 0;
  while (ok < n_in && in[ok] && atomic_load_explicit(&in[ok]->refcount, memory_order_relaxed) > 0 &&
         !in[ok]->is_meta)
    ok++;
  pd_status st;
  if (__builtin_expect(ok < n_in, 0) && (st = check_inputs(def, in, n_in)) != PD_OK) return st;
  if (def->n_in >= 0 && n_in != def->n_in)
    return pd_set_error(PD_ERR_INVALID, "%s: expects %d inputs, got %d", def->name, def->n_in, n_in);
  if ((st = check_foreign_dtensor(def, in, n_in)) != PD_OK) return st;
  static const pd_attrs zero_attrs;
  if (!a) a = &zero_attrs;

  pd_internal_enter();
  if ((def->flags & (PD_OPF_PROMOTE | PD_OPF_HALF_VIA_F32 | PD_OPF_FLOAT_ONLY)) &&
      needs_conversion(def, in, n_in))
    st = run_converted(id, in, n_in, a, out, n_out);
  else if (__builtin_expect(t_ctx.hooked, 0))
    st = run_general(id, in, n_in, a, out, n_out);
  else
    st = run(id, in, n_in, a, out, n_out, false);
  pd_internal_leave();
  if (st == PD_OK && track)
    for (int k = 0; k < *n_out; k++) pd_scope_track(out[k]);
  return st;
}

static __attribute__((noinline)) pd_status dispatch_general(pd_op_id id, pd_tensor *const *in, int n_in,
                                                            const pd_attrs *a, pd_tensor **out, int *n_out,
                                                            bool track) {
  return dispatch_impl(id, in, n_in, a, out, n_out, track);
}

pd_status pd_dispatch(pd_op_id id, pd_tensor *const *in, int n_in, const pd_attrs *a, pd_tensor **out,
                      int *n_out) {
  return dispatch_general(id, in, n_in, a, out, n_out, true);
}

pd_status pd_dispatch_into(pd_op_id id, pd_tensor *const *in, int n_in, const pd_attrs *a,
                           pd_tensor *const *out, int n_out) {
  const pd_op_def *def = pd_op_table[id];
  if (def->flags & (PD_OPF_VIEW | PD_OPF_INPLACE))
    return pd_set_error(PD_ERR_INVALID, "%s: a view or inplace op has no fresh outputs to write into",
                        def->name);
  if (def->n_in >= 0 && n_in != def->n_in)
    return pd_set_error(PD_ERR_INVALID, "%s: expects %d inputs, got %d", def->name, def->n_in, n_in);
  for (int i = 0; i < n_in; i++) {
    if (!in[i]) return pd_set_error(PD_ERR_INVALID, "%s: input %d is NULL", def->name, i);
    if (in[i]->is_meta)
      return pd_set_error(PD_ERR_STATE, "%s: input %d is a static Variable with no data", def->name, i);
  }
  pd_status st = check_foreign_dtensor(def, in, n_in);
  if (st != PD_OK) return st;
  static const pd_attrs zero_attrs;
  if (!a) a = &zero_attrs;
  pd_meta meta[PD_MAX_OUTPUTS];
  int nm = def->n_out;
  st = def->infer_meta(def, in, n_in, a, meta, &nm);
  if (st != PD_OK) return st;
  if (nm != n_out)
    return pd_set_error(PD_ERR_INVALID, "%s: writes %d outputs, %d given", def->name, nm, n_out);
  pd_tensor *o[PD_MAX_OUTPUTS];
  for (int k = 0; k < nm; k++) {
    o[k] = out[k];
    if (!o[k]) return pd_set_error(PD_ERR_INVALID, "%s: output %d is NULL", def->name, k);
    if (o[k]->is_meta || !o[k]->is_contiguous || o[k]->dtype != meta[k].dtype || o[k]->ndim != meta[k].ndim ||
        !pd_shape_eq(meta[k].ndim, o[k]->shape, meta[k].shape)) {
      char want[160];
      return pd_set_error(
          PD_ERR_SHAPE,
          "%s: output %d must be a contiguous %s tensor of shape %s; the one given is %s%s of "
          "shape %s",
          def->name, k, pd_dtype_name(meta[k].dtype),
          pd_shape_str(meta[k].ndim, meta[k].shape, want, sizeof want),
          o[k]->is_contiguous ? "" : "a strided ", pd_dtype_name(o[k]->dtype), PD_SHAPE_STR(o[k]));
    }
  }
  pd_place_kind place = n_in > 0 ? in[0]->place.kind : PD_PLACE_CPU;
  pd_kernel_fn kernel = def->kernel[place];
  if (!kernel) return pd_set_error(PD_ERR_UNIMPLEMENTED, "%s: no kernel for place %d", def->name, (int)place);
  pd_internal_enter();
  pd_thread_governor_poke();
  const pd_kernel_ctx kc = {def, in, n_in, a, meta, o, nm};
  st = kernel(&kc);
  pd_internal_leave();
  return st;
}

pd_status pd_dispatch_inplace_trusted(pd_op_id id, pd_tensor *const *in, int n_in, const pd_attrs *a) {
  const pd_op_def *def = pd_op_table[id];
  bool plain =
      t_ctx.no_grad && !t_ctx.hooked && (def->flags & PD_OPF_INPLACE) && in[0]->place.kind == PD_PLACE_CPU;
  for (int i = 0; i < n_in && plain; i++) plain = !in[i]->dist_attr && !in[i]->is_meta;
  if (!plain) {
    pd_tensor *out[PD_MAX_OUTPUTS];
    int n_out = 0;
    pd_status st = dispatch_general(id, in, n_in, a, out, &n_out, false);
    for (int k = 0; k < n_out; k++) pd_tensor_release(out[k]);
    return st;
  }
  if (!(def->flags & PD_OPF_GEOMETRY) && pd_check_inplace_target(def->name, in[0]) != PD_OK)
    return pd_last_status();
  pd_tensor *out[PD_MAX_OUTPUTS]; /* an inplace row's outputs: x, then none (not the whole array) */
  for (int k = 1; k < def->n_out; k++) out[k] = NULL;
  out[0] = in[0];
  pd_internal_enter();
  const pd_kernel_ctx kc = {def, in, n_in, a, NULL, out, def->n_out};
  pd_status st = def->kernel[PD_PLACE_CPU](&kc);
  pd_internal_leave();
  if (st == PD_OK) in[0]->storage->version++;
  return st;
}

pd_tensor *pd_dispatch1(pd_op_id id, pd_tensor *const *in, int n_in, const pd_attrs *a) {
  pd_tensor *out[PD_MAX_OUTPUTS];
  int n = 0;
  if (dispatch_impl(id, in, n_in, a, out, &n, false) != PD_OK) return NULL;
  for (int k = 1; k < n; k++) pd_tensor_release(out[k]); /* never handed out: not in a scope */
  return n > 0 ? pd_scope_track(out[0]) : NULL;
}

pd_tensor *pd_grad_reduce_to(pd_tensor *g, int ndim, const int64_t *shape) {
  int gn;
  const int64_t *gs = pd_global_shape(g, &gn); /* a DTensor's decisions are the same on every rank */
  if (gn == ndim && pd_shape_eq(ndim, gs, shape)) return pd_tensor_retain(g);
  pd_attrs sa = {0};
  int lead = gn - ndim;
  for (int d = 0; d < gn; d++)
    if (d < lead || (shape[d - lead] == 1 && gs[d] != 1)) sa.v[0][sa.nv[0]++] = d;
  sa.dtype = g->dtype;
  /* Only leading dims reduced (a bias's gradient): the sum without keepdim
   * has the shape already. */
  bool lead_only = sa.nv[0] > 0;
  for (int d = lead; d < gn && lead_only; d++) lead_only = shape[d - lead] == gs[d];
  if (lead_only) return pd_dispatch1(PD_OP_sum, &g, 1, &sa);
  sa.i[0] = 1; /* keepdim */
  pd_tensor *s = sa.nv[0] ? pd_dispatch1(PD_OP_sum, &g, 1, &sa) : pd_tensor_retain(g);
  if (!s) return NULL;
  pd_attrs ra = {0};
  ra.nv[0] = ndim;
  memcpy(ra.v[0], shape, sizeof(int64_t) * (size_t)ndim);
  pd_tensor *r = pd_dispatch1(PD_OP_reshape, &s, 1, &ra);
  pd_tensor_release(s);
  return r;
}

bool pd_grad_mode_enabled(void) { return !t_ctx.no_grad; }
bool pd_grad_mode_set(bool on) {
  bool prev = !t_ctx.no_grad;
  t_ctx.no_grad = !on;
  return prev;
}
