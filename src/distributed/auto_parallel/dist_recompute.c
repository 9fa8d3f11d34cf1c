/* Strategy.recompute as a rewrite of the recorded train Program (between
 * record and complete, dist_program.h), Paddle's auto_parallel_recompute
 * pass: the activations inside a recompute segment are not kept from the
 * forward to the backward; the segment's forward ops run again just before
 * the first backward op that needs one of them.
 *
 * The segments are what the model marks: each call of a layer given to
 * pd_dist_recompute records its ops under the name scope
 * "auto_parallel/rc_<n>/" (Paddle's auto.recompute does the same), and a
 * segment is a run of consecutive forward ops of one such call (numbered
 * from 0 in forward order; Strategy.recompute.no_recompute_segments lists
 * those to leave alone). For each segment:
 *   held      the values the rewrite leaves alone: what the segment reads
 *             from outside, what a later forward op reads or a fetch
 *             returns (the segment's output, a checkpoint), persistables,
 *             and the outputs of the ops that are not run again (random
 *             ops such as dropout keep their draws and masks, constants);
 *   copied    the segment's registry ops with an output that is not held
 *             are appended again (outputs renamed <name>.subprog_<i>,
 *             role backward) just before the first backward op reading
 *             such an output; from there on the backward reads the copies.
 * So the originals die within the forward and the planner reuses their
 * bytes; the copies are the same ops on the same values (same bits). A
 * segment holding an inplace op is left as it is (running it again could
 * write over a held value). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist_program.h"

/* ---- marking segments while record runs the layer -------------------------- */
#define RC_SCOPE "auto_parallel/rc_"
enum { RC_MAX_DEPTH = 64 };

static _Thread_local bool t_marking;              /* record is running the layer */
static _Thread_local int t_depth;                 /* marked calls open on this thread */
static _Thread_local bool t_opened[RC_MAX_DEPTH]; /* whether each opened a name scope */
static int g_next_segment;                        /* Paddle's _g_recompute_idx */

static int rc_pre(pd_layer *l, pd_tensor **in, int n_in, void *user) {
  (void)l, (void)in, (void)n_in, (void)user;
  bool open = t_marking && t_depth < RC_MAX_DEPTH;
  if (open) {
    char scope[48];
    snprintf(scope, sizeof scope, RC_SCOPE "%d", __atomic_fetch_add(&g_next_segment, 1, __ATOMIC_RELAXED));
    pd_static_name_scope_begin(scope);
  }
  if (t_depth < RC_MAX_DEPTH) t_opened[t_depth] = open;
  t_depth++;
  return 0;
}

static int rc_post(pd_layer *l, pd_tensor *const *in, int n_in, pd_tensor **out, int n_out, void *user) {
  (void)l, (void)in, (void)n_in, (void)out, (void)n_out, (void)user;
  if (t_depth <= 0) return 0;
  t_depth--;
  if (t_depth < RC_MAX_DEPTH && t_opened[t_depth]) pd_static_name_scope_end();
  return 0;
}

pd_status pd_dist_recompute(pd_layer *layer) {
  if (!layer) return pd_set_error(PD_ERR_INVALID, "dist.recompute: layer is NULL");
  int pre = pd_layer_register_forward_pre_hook(layer, rc_pre, NULL);
  if (pre < 0) return pre;
  int post = pd_layer_register_forward_post_hook(layer, rc_post, NULL);
  if (post < 0) {
    pd_layer_remove_hook(layer, pre);
    return post;
  }
  return PD_OK;
}

void pd_ap_recompute_marking(bool on) {
  /* a forward that failed left its post hooks unrun: close their scopes */
  while (t_depth > 0) {
    t_depth--;
    if (t_depth < RC_MAX_DEPTH && t_opened[t_depth]) pd_static_name_scope_end();
  }
  t_marking = on;
}

/* The segment an op was recorded in (its outermost marked call), -1: none. */
static int segment_of(const pd_operator *op) {
  const char *s = strstr(op->name_scope, RC_SCOPE);
  if (!s) return -1;
  char *end;
  long n = strtol(s + strlen(RC_SCOPE), &end, 10);
  return end != s + strlen(RC_SCOPE) && *end == '/' ? (int)n : -1;
}

/* ---- the rewrite ------------------------------------------------------------ */
typedef struct rewrite {
  pd_ap_program *p;
  pd_static_block *b;
  int n_fwd; /* ops before the first backward or optimizer op */
} rewrite;

static bool reads(const pd_operator *op, const char *name) {
  for (int i = 0; i < op->n_in; i++)
    if (strcmp(op->inputs[i], name) == 0) return true;
  return false;
}

/* Whether op is run again: a registry op drawing no random numbers. */
static bool rerun(const pd_operator *op) {
  return op->op_id >= 0 && !op->fused && !(pd_op_table[op->op_id]->flags & PD_OPF_RANDOM);
}

/* Whether value `name`, written in the segment ending before op e, must
 * stay: read by a forward op after the segment, fetched, persistable or
 * data. */
static bool held(const rewrite *w, int e, const char *name) {
  const pd_variable *v = pd_ir_find_var(w->b, name);
  if (!v || v->persistable || v->is_data) return true;
  for (int k = e; k < w->n_fwd; k++)
    if (reads(w->b->ops[k], name)) return true;
  for (int i = 0; i < w->p->n_fetch; i++)
    if (strcmp(w->p->fetch[i], name) == 0) return true;
  return false;
}

/* The renamed values of one segment: original -> copy. */
typedef struct renames {
  char (*from)[PD_AP_NAME_LEN];
  char (*to)[PD_AP_NAME_LEN + 16];
  bool *needed; /* read by the backward: the backward switches to the copy */
  int n, cap;
} renames;

static const char *renamed(const renames *r, const char *name, bool needed_only) {
  for (int i = 0; i < r->n; i++)
    if (strcmp(r->from[i], name) == 0 && (!needed_only || r->needed[i])) return r->to[i];
  return NULL;
}

static pd_status add_rename(rewrite *w, renames *r, const char *name, int seg, bool needed) {
  if (renamed(r, name, false)) return PD_OK;
  if (r->n == r->cap) {
    int cap = r->cap ? 2 * r->cap : 16;
    void *f = realloc(r->from, sizeof *r->from * (size_t)cap);
    if (f) r->from = f;
    void *t = f ? realloc(r->to, sizeof *r->to * (size_t)cap) : NULL;
    if (t) r->to = t;
    void *nd = t ? realloc(r->needed, sizeof *r->needed * (size_t)cap) : NULL;
    if (!nd) return pd_set_error(PD_ERR_MEMORY, "Strategy.recompute: out of memory");
    r->needed = nd;
    r->cap = cap;
  }
  const pd_variable *v = pd_ir_find_var(w->b, name);
  if (!v || strlen(name) >= PD_AP_NAME_LEN)
    return pd_set_error(PD_ERR_UNIMPLEMENTED, "Strategy.recompute: cannot rename value '%s'", name);
  snprintf(r->from[r->n], PD_AP_NAME_LEN, "%s", name);
  snprintf(r->to[r->n], PD_AP_NAME_LEN + 16, "%s.subprog_%d", name, seg);
  r->needed[r->n] = needed;
  pd_variable *c = pd_ir_add_var(w->b, r->to[r->n], v->dtype, v->ndim, v->shape, NULL);
  if (!c) return pd_last_status();
  c->stop_gradient = v->stop_gradient;
  r->n++;
  return PD_OK;
}

/* Moves the last n ops of b, in order, to index at. */
static pd_status move_tail(pd_static_block *b, int at, int n) {
  pd_operator **tmp = malloc(sizeof *tmp * (size_t)n);
  if (!tmp) return pd_set_error(PD_ERR_MEMORY, "Strategy.recompute: out of memory");
  memcpy(tmp, b->ops + b->n_ops - n, sizeof *tmp * (size_t)n);
  memmove(b->ops + at + n, b->ops + at, sizeof *b->ops * (size_t)(b->n_ops - n - at));
  memcpy(b->ops + at, tmp, sizeof *tmp * (size_t)n);
  free(tmp);
  return PD_OK;
}

/* Segment [s, e) (index seg): its copies before the first backward reader. */
static pd_status recompute_segment(rewrite *w, int s, int e, int seg) {
  pd_static_block *b = w->b;
  for (int k = s; k < e; k++)
    if (b->ops[k]->op_id >= 0 && (pd_op_table[b->ops[k]->op_id]->flags & PD_OPF_INPLACE)) return PD_OK;
  renames r = {0};
  pd_status st = PD_OK;
  bool *copy = calloc((size_t)(e - s) + 1, sizeof *copy);
  if (!copy) return pd_set_error(PD_ERR_MEMORY, "Strategy.recompute: out of memory");
  /* the ops run again and their outputs; the ones the backward reads switch */
  for (int k = s; k < e && st == PD_OK; k++) {
    const pd_operator *op = b->ops[k];
    if (!rerun(op)) continue;
    for (int j = 0; j < op->n_out; j++)
      if (strcmp(op->outputs[j], PD_STATIC_EMPTY_VAR) != 0 && !held(w, e, op->outputs[j])) copy[k - s] = true;
    for (int j = 0; j < op->n_out && copy[k - s] && st == PD_OK; j++)
      if (strcmp(op->outputs[j], PD_STATIC_EMPTY_VAR) != 0)
        st = add_rename(w, &r, op->outputs[j], seg, !held(w, e, op->outputs[j]));
  }
  /* where the copies go: before the first backward op reading a switched value */
  int at = b->n_ops;
  for (int k = w->n_fwd; k < b->n_ops && at == b->n_ops && st == PD_OK; k++)
    for (int i = 0; i < r.n && at == b->n_ops; i++)
      if (r.needed[i] && reads(b->ops[k], r.from[i])) at = k;
  int n_copies = 0;
  for (int k = s; k < e && st == PD_OK && at < b->n_ops; k++) {
    if (!copy[k - s]) continue;
    pd_operator *c = pd_ir_copy_op(b, b->ops[k]);
    if (!c) {
      st = pd_last_status();
      break;
    }
    n_copies++;
    c->role = PD_OP_ROLE_BACKWARD;
    c->name_scope[0] = 0;
    for (int i = 0; i < c->n_in && st == PD_OK; i++) {
      const char *to = renamed(&r, c->inputs[i], false);
      if (to) st = pd_ir_set_slot(&c->inputs[i], to);
    }
    for (int j = 0; j < c->n_out && st == PD_OK; j++) {
      const char *to = renamed(&r, c->outputs[j], false);
      if (to) st = pd_ir_set_slot(&c->outputs[j], to);
    }
  }
  if (st == PD_OK && n_copies > 0) st = move_tail(b, at, n_copies);
  if (st == PD_OK && n_copies > 0) {
    for (int k = at + n_copies; k < b->n_ops && st == PD_OK; k++) {
      pd_operator *op = b->ops[k];
      for (int i = 0; i < op->n_in && st == PD_OK; i++) {
        const char *to = renamed(&r, op->inputs[i], true);
        if (to) st = pd_ir_set_slot(&op->inputs[i], to);
      }
    }
  }
  free(copy);
  free(r.from);
  free(r.to);
  free(r.needed);
  return st;
}

/* Counts the segments of the forward ops in *count and, with run, rewrites
 * each one whose index (in forward order) skip does not list. */
static pd_status each_segment(rewrite *w, const int *skip, int n_skip, bool run, int *count) {
  pd_static_block *b = w->b;
  int seg = 0;
  pd_status st = PD_OK;
  for (int s = 0; s < w->n_fwd && st == PD_OK;) {
    int id = segment_of(b->ops[s]), e = s + 1;
    while (e < w->n_fwd && segment_of(b->ops[e]) == id) e++;
    if (id >= 0) {
      bool skipped = false;
      for (int i = 0; i < n_skip; i++) skipped = skipped || skip[i] == seg;
      if (run && !skipped) st = recompute_segment(w, s, e, seg);
      seg++;
    }
    s = e;
  }
  *count = seg;
  return st;
}

pd_status pd_ap_recompute(pd_ap_program *serial, const int *skip, int n_skip, int *n_segments) {
  rewrite w = {.p = serial, .b = serial->main->blocks[0]};
  pd_static_block *b = w.b;
  w.n_fwd = b->n_ops;
  for (int k = 0; k < b->n_ops && w.n_fwd == b->n_ops; k++)
    if (b->ops[k]->role & (PD_OP_ROLE_BACKWARD | PD_OP_ROLE_OPTIMIZE)) w.n_fwd = k;
  int count = 0;
  pd_status st = each_segment(&w, NULL, 0, false, &count);
  for (int i = 0; i < n_skip && st == PD_OK; i++)
    if (skip[i] < 0 || skip[i] >= count)
      st = pd_set_error(PD_ERR_INVALID,
                        "Strategy.recompute.no_recompute_segments: segment %d, but the train Program has %d "
                        "recompute segments (0 to %d)",
                        skip[i], count, count - 1);
  if (st == PD_OK) st = each_segment(&w, skip, n_skip, true, &count);
  if (n_segments) *n_segments = count;
  pd_ir_touch(serial->main);
  return st;
}
