/* paddle.distributed collectives on tensors: validation, packing of tensor
 * lists, AVG, sync and async (tasks), then the group's backend. */
#include <stdlib.h>
#include <string.h>

#include "../../core/tensor_impl.h"
#include "../../kernels/cpu/comm_reduce.h"
#include "blocked_layout.h"
#include "group_internal.h"

typedef struct coll_call {
  pd_comm_kind kind;
  pd_dist_group *g;
  void *in, *out;
  size_t count;
  pd_dtype dt;
  pd_reduce_op op;
  int root;               /* group rank */
  size_t *counts;         /* alltoall: send counts then recv counts (2 * nranks) */
  size_t rows, out_rows;  /* the blocked forms (rows > 0): rows per block of in / out (blocked_layout.h) */
  unsigned char *own_in;  /* packed input of a tensor list (owned) */
  unsigned char *own_out; /* packed output (owned): block i goes to unpack[i] */
  pd_tensor **unpack;
  int nunpack;
  size_t block_bytes;
  pd_tensor *keep[2]; /* tensors the call reads or writes */
  pd_tensor **keep_list;
  int nkeep_list;
} coll_call;

/* A backend without the blocked forms: the plain call on packed copies
 * (in and out are one block each side of the call, count elements). */
static pd_status run_blocked_packed(coll_call *c, pd_reduce_op op) {
  pd_comm *comm = c->g->comm;
  const pd_comm_ops *ops = comm->ops;
  size_t n = (size_t)c->g->nranks, es = pd_dtype_size(c->dt), count = c->count;
  size_t ic = count / c->rows, oc = c->out_rows ? count / c->out_rows : 0;
  size_t bytes = (c->kind == PD_COMM_ALLTOALL ? 2 : 1) * n * count * es; /* alltoall: in and out */
  unsigned char *tmp = malloc(bytes + 1), *tmp2 = tmp + n * count * es;
  if (!tmp) return pd_set_error(PD_ERR_MEMORY, "distributed: out of memory for %zu bytes", bytes);
  const unsigned char *in = c->in;
  unsigned char *out = c->out;
  pd_status st;
  if (c->kind == PD_COMM_ALL_GATHER) {
    st = ops->all_gather(comm, in, tmp, count, c->dt);
    if (st == PD_OK) pd_blocked_unpack(out, tmp, n, count, ic, es);
  } else if (c->kind == PD_COMM_REDUCE_SCATTER) {
    pd_blocked_pack(tmp, in, n, count, ic, es);
    st = ops->reduce_scatter(comm, tmp, out, count, c->dt, op);
  } else {
    size_t *counts = malloc(n * sizeof *counts + 1);
    st = counts ? PD_OK : pd_set_error(PD_ERR_MEMORY, "alltoall: out of memory");
    for (size_t j = 0; counts && j < n; j++) counts[j] = count;
    if (st == PD_OK) {
      pd_blocked_pack(tmp, in, n, count, ic, es);
      st = ops->alltoall(comm, tmp, counts, tmp2, counts, c->dt);
    }
    if (st == PD_OK) pd_blocked_unpack(out, tmp2, n, count, oc, es);
    free(counts);
  }
  free(tmp);
  return st;
}

/* all_gather, reduce_scatter and alltoall with blocked buffers (c->rows > 0). */
static pd_status run_blocked(coll_call *c, pd_reduce_op op) {
  pd_comm *comm = c->g->comm;
  const pd_comm_ops *ops = comm->ops;
  size_t cols = c->count / c->rows;
  switch (c->kind) {
    case PD_COMM_ALL_GATHER:
      if (ops->all_gather_blocked) return ops->all_gather_blocked(comm, c->in, c->out, c->rows, cols, c->dt);
      if (c->rows == 1) return ops->all_gather(comm, c->in, c->out, c->count, c->dt);
      break;
    case PD_COMM_REDUCE_SCATTER:
      if (ops->reduce_scatter_blocked)
        return ops->reduce_scatter_blocked(comm, c->in, c->out, c->rows, cols, c->dt, op);
      if (c->rows == 1) return ops->reduce_scatter(comm, c->in, c->out, c->count, c->dt, op);
      break;
    default:
      if (ops->alltoall_blocked)
        return ops->alltoall_blocked(comm, c->in, c->rows, c->out, c->out_rows, c->count, c->dt);
  }
  return run_blocked_packed(c, op);
}

static pd_status run_call(struct pd_dist_task *t) {
  coll_call *c = t->call;
  pd_comm *comm = c->g->comm;
  const pd_comm_ops *ops = comm->ops;
  int divide_after = c->op == PD_REDUCE_AVG && !ops->avg_native;
  pd_reduce_op op = divide_after ? PD_REDUCE_SUM : c->op;
  pd_status st;
  if (c->rows) {
    st = run_blocked(c, op);
  } else {
    switch (c->kind) {
      case PD_COMM_ALL_REDUCE:
        st = ops->all_reduce(comm, c->in, c->out, c->count, c->dt, op);
        break;
      case PD_COMM_BROADCAST:
        st = ops->broadcast(comm, c->out, c->count, c->dt, c->root);
        break;
      case PD_COMM_REDUCE:
        st = ops->reduce(comm, c->in, c->out, c->count, c->dt, op, c->root);
        break;
      case PD_COMM_ALL_GATHER:
        st = ops->all_gather(comm, c->in, c->out, c->count, c->dt);
        break;
      case PD_COMM_REDUCE_SCATTER:
        st = ops->reduce_scatter(comm, c->in, c->out, c->count, c->dt, op);
        break;
      case PD_COMM_ALLTOALL:
        st = ops->alltoall(comm, c->in, c->counts, c->out, c->counts + c->g->nranks, c->dt);
        break;
      case PD_COMM_SCATTER:
        st = ops->scatter(comm, c->in, c->out, c->count, c->dt, c->root);
        break;
      case PD_COMM_GATHER:
        st = ops->gather(comm, c->in, c->out, c->count, c->dt, c->root);
        break;
      case PD_COMM_SEND:
        st = ops->send(comm, c->in, c->count, c->dt, c->root);
        break;
      case PD_COMM_RECV:
        st = ops->recv(comm, c->out, c->count, c->dt, c->root);
        break;
      case PD_COMM_BARRIER:
        st = ops->barrier(comm);
        break;
      default:
        st = pd_set_error(PD_ERR_INVALID, "distributed: unknown collective %d", c->kind);
    }
  }
  if (st < 0) return st;
  if (divide_after) {
    if (c->kind != PD_COMM_REDUCE || c->g->rank == c->root)
      pdk_comm_divide(c->out, c->count, c->dt, c->g->nranks);
  }
  for (int i = 0; i < c->nunpack; i++)
    if (c->unpack[i])
      memcpy(pd_data_ptr(c->unpack[i]), c->own_out + (size_t)i * c->block_bytes, c->block_bytes);
  return PD_OK;
}

static void cleanup_call(struct pd_dist_task *t) {
  coll_call *c = t->call;
  if (!c) return;
  for (int i = 0; i < 2; i++) pd_tensor_release(c->keep[i]);
  for (int i = 0; i < c->nkeep_list; i++) pd_tensor_release(c->keep_list[i]);
  free(c->keep_list);
  free(c->unpack);
  free(c->own_in);
  free(c->own_out);
  free(c->counts);
  free(c);
  t->call = NULL;
}

static coll_call *call_new(pd_comm_kind kind, pd_dist_group *g) {
  coll_call *c = calloc(1, sizeof *c);
  if (!c) {
    pd_set_error(PD_ERR_MEMORY, "distributed: out of memory");
    return NULL;
  }
  c->kind = kind;
  c->g = g;
  c->root = -1;
  c->op = PD_REDUCE_SUM;
  return c;
}

static void call_keep(coll_call *c, int slot, pd_tensor *t) {
  if (t) c->keep[slot] = pd_tensor_retain(t);
}

/* Holds the tensors of a list until the call is done (appends). */
static pd_status call_keep_list(coll_call *c, pd_tensor **list, int n) {
  pd_tensor **v = realloc(c->keep_list, (size_t)(c->nkeep_list + n + 1) * sizeof *v);
  if (!v) return pd_set_error(PD_ERR_MEMORY, "distributed: out of memory");
  c->keep_list = v;
  for (int i = 0; i < n; i++) v[c->nkeep_list++] = list[i] ? pd_tensor_retain(list[i]) : NULL;
  return PD_OK;
}

static pd_status submit(coll_call *c, int lane, pd_dist_task **task) {
  struct pd_dist_task *t = pd_dist_task_new(run_call, cleanup_call, c);
  if (!t) {
    struct pd_dist_task tmp = {.call = c};
    cleanup_call(&tmp);
    return pd_last_status();
  }
  return pd_dist_submit(c->g, lane, t, task);
}

static void call_free(coll_call *c) {
  struct pd_dist_task tmp = {.call = c};
  cleanup_call(&tmp);
}

/* ---- validation ---- */
static pd_status check_tensor(const pd_tensor *t, const char *op, const char *what) {
  if (!t) return pd_set_error(PD_ERR_INVALID, "%s: %s is NULL", op, what);
  if (t->is_meta) return pd_tensor_meta_error(op, t); /* a static Variable has no data to send */
  if (!t->is_contiguous)
    return pd_set_error(PD_ERR_INVALID, "%s: %s must be contiguous (call pd_contiguous first)", op, what);
  return PD_OK;
}

/* Resolves the group; *skip when this process is not a member. */
static pd_dist_group *group_of(const pd_dist_opts *o, const char *op, int *skip) {
  pd_dist_group *g = pd_dist_resolve_group(o ? o->group : NULL, op);
  *skip = g && g->rank < 0;
  if (o && o->task) *o->task = NULL;
  return g;
}

static int group_rank_of(pd_dist_group *g, int global, const char *op, const char *what) {
  int r = pd_dist_group_get_group_rank(g, global);
  if (r < 0)
    pd_set_error(PD_ERR_INDEX, "%s: %s %d is not a member of group %d (world size %d)", op, what, global,
                 g->id, pd_dist_get_world_size(NULL));
  return r;
}

static pd_status check_op(pd_reduce_op op, pd_dtype dt, const char *name) {
  if ((int)op < 0 || op >= PD_NUM_REDUCE_OPS)
    return pd_set_error(PD_ERR_INVALID, "%s: reduce op %d is not one of SUM, MAX, MIN, PROD, AVG", name,
                        (int)op);
  if (op == PD_REDUCE_AVG && dt == PD_BOOL)
    return pd_set_error(PD_ERR_DTYPE, "%s: AVG is not defined for bool tensors", name);
  return PD_OK;
}

/* Every slot of a list the caller supplies must be set. */
static pd_status check_list_filled(pd_tensor *const *list, int n, const char *op) {
  if (!list) return pd_set_error(PD_ERR_INVALID, "%s: tensor_list is NULL", op);
  for (int i = 0; i < n; i++)
    if (!list[i]) return pd_set_error(PD_ERR_INVALID, "%s: tensor_list[%d] is NULL", op, i);
  return PD_OK;
}

/* The start the collectives on one tensor share: resolve the group, check
 * the tensor and the reduce op (op >= 0), and for a rooted collective
 * (root_what set) find the root's group rank (members only). Returns the
 * call with count, dtype, op and root set and the tensor held; NULL with
 * *st = PD_OK when this process is not in the group, or with the error. */
static coll_call *tensor_call(pd_comm_kind kind, const char *name, pd_tensor *tensor, int op, int root_global,
                              const char *root_what, const pd_dist_opts *opts, pd_status *st) {
  if (tensor && tensor->is_meta) { /* before the group: the same error in any process */
    if (opts && opts->task) *opts->task = NULL;
    *st = pd_tensor_meta_error(name, tensor);
    return NULL;
  }
  int skip;
  pd_dist_group *g = group_of(opts, name, &skip);
  *st = PD_OK; /* a non-member returns NULL with PD_OK */
  if (!g || check_tensor(tensor, name, "tensor") < 0 ||
      (op >= 0 && check_op((pd_reduce_op)op, tensor->dtype, name) < 0))
    *st = pd_last_status();
  if (*st != PD_OK || skip) return NULL;
  int root = root_what ? group_rank_of(g, root_global, name, root_what) : -1;
  coll_call *c = root_what && root < 0 ? NULL : call_new(kind, g);
  if (!c) {
    *st = pd_last_status();
    return NULL;
  }
  c->count = (size_t)tensor->numel;
  c->dt = tensor->dtype;
  if (op >= 0) c->op = (pd_reduce_op)op;
  c->root = root;
  call_keep(c, 0, tensor);
  return c;
}

/* ---- the API ---- */
pd_status pd_dist_all_reduce(pd_tensor *tensor, pd_reduce_op op, const pd_dist_opts *opts) {
  pd_status st;
  coll_call *c = tensor_call(PD_COMM_ALL_REDUCE, "all_reduce", tensor, (int)op, 0, NULL, opts, &st);
  if (!c) return st;
  c->in = c->out = pd_data_ptr(tensor);
  return submit(c, PD_LANE_COLL, opts ? opts->task : NULL);
}

pd_status pd_dist_all_reduce_into(pd_tensor *out, pd_tensor *in, pd_reduce_op op, const pd_dist_opts *opts) {
  pd_status st;
  coll_call *c = tensor_call(PD_COMM_ALL_REDUCE, "all_reduce", in, (int)op, 0, NULL, opts, &st);
  if (!c) return st;
  if (check_tensor(out, "all_reduce", "out") < 0)
    st = pd_last_status();
  else if (out->dtype != in->dtype || out->numel != in->numel)
    st = pd_set_error(
        PD_ERR_SHAPE, "all_reduce: out has dtype %s and %lld elements but the tensor has %s and %lld",
        pd_dtype_name(out->dtype), (long long)out->numel, pd_dtype_name(in->dtype), (long long)in->numel);
  if (st != PD_OK) {
    call_free(c);
    return st;
  }
  c->in = pd_data_ptr(in);
  c->out = pd_data_ptr(out);
  call_keep(c, 1, out);
  return submit(c, PD_LANE_COLL, opts ? opts->task : NULL);
}

pd_status pd_dist_broadcast(pd_tensor *tensor, int src, const pd_dist_opts *opts) {
  pd_status st;
  coll_call *c = tensor_call(PD_COMM_BROADCAST, "broadcast", tensor, -1, src, "src", opts, &st);
  if (!c) return st;
  c->out = pd_data_ptr(tensor);
  return submit(c, PD_LANE_COLL, opts ? opts->task : NULL);
}

pd_status pd_dist_reduce(pd_tensor *tensor, int dst, pd_reduce_op op, const pd_dist_opts *opts) {
  pd_status st;
  coll_call *c = tensor_call(PD_COMM_REDUCE, "reduce", tensor, (int)op, dst, "dst", opts, &st);
  if (!c) return st;
  c->in = c->out = pd_data_ptr(tensor);
  return submit(c, PD_LANE_COLL, opts ? opts->task : NULL);
}

/* Checks (or creates) the n slots of a tensor list shaped like `like`. */
static pd_status prepare_list(pd_tensor **list, int n, const pd_tensor *like, const char *op,
                              const char *what) {
  if (!list) return pd_set_error(PD_ERR_INVALID, "%s: %s is NULL", op, what);
  for (int i = 0; i < n; i++) {
    if (!list[i]) {
      pd_tensor *t = pd_tensor_new(like->dtype, like->ndim, like->shape);
      if (!t) return pd_last_status();
      list[i] = t;
      continue;
    }
    if (check_tensor(list[i], op, what) < 0) return pd_last_status();
    if (list[i]->dtype != like->dtype || list[i]->numel != like->numel)
      return pd_set_error(PD_ERR_SHAPE,
                          "%s: %s[%d] has dtype %s and %lld elements but the tensor has %s and %lld", op,
                          what, i, pd_dtype_name(list[i]->dtype), (long long)list[i]->numel,
                          pd_dtype_name(like->dtype), (long long)like->numel);
  }
  return PD_OK;
}

/* Copies n list tensors (each `bytes`) into one packed buffer. */
static unsigned char *pack_list(pd_tensor **list, int n, size_t bytes) {
  unsigned char *buf = malloc(bytes * (size_t)n + 1);
  if (!buf) {
    pd_set_error(PD_ERR_MEMORY, "distributed: out of memory for %zu bytes", bytes * (size_t)n);
    return NULL;
  }
  for (int i = 0; i < n; i++) memcpy(buf + (size_t)i * bytes, pd_data_ptr(list[i]), bytes);
  return buf;
}

/* The call writes into tmp, then block i is copied into list[i]. */
static pd_status set_unpack(coll_call *c, pd_tensor **list, int n, size_t bytes) {
  c->own_out = malloc(bytes * (size_t)n + 1);
  c->unpack = malloc((size_t)n * sizeof *c->unpack + 1);
  if (!c->own_out || !c->unpack) return pd_set_error(PD_ERR_MEMORY, "distributed: out of memory");
  memcpy(c->unpack, list, (size_t)n * sizeof *list);
  c->nunpack = n;
  c->block_bytes = bytes;
  c->out = c->own_out;
  return call_keep_list(c, list, n);
}

pd_status pd_dist_all_gather(pd_tensor **tensor_list, pd_tensor *tensor, const pd_dist_opts *opts) {
  int skip;
  pd_dist_group *g = group_of(opts, "all_gather", &skip);
  if (!g || check_tensor(tensor, "all_gather", "tensor") < 0) return pd_last_status();
  if (skip) return PD_OK; /* not a member */
  if (prepare_list(tensor_list, g->nranks, tensor, "all_gather", "tensor_list") < 0) return pd_last_status();
  coll_call *c = call_new(PD_COMM_ALL_GATHER, g);
  if (!c) return pd_last_status();
  size_t bytes = (size_t)tensor->numel * pd_dtype_size(tensor->dtype);
  if (set_unpack(c, tensor_list, g->nranks, bytes) < 0) {
    call_free(c);
    return pd_last_status();
  }
  c->in = pd_data_ptr(tensor);
  c->count = (size_t)tensor->numel;
  c->dt = tensor->dtype;
  call_keep(c, 0, tensor);
  return submit(c, PD_LANE_COLL, opts ? opts->task : NULL);
}

pd_status pd_dist_all_gather_into_tensor(pd_tensor *out, pd_tensor *tensor, const pd_dist_opts *opts) {
  int skip;
  pd_dist_group *g = group_of(opts, "all_gather", &skip);
  if (!g || check_tensor(tensor, "all_gather", "tensor") < 0 || check_tensor(out, "all_gather", "out") < 0)
    return pd_last_status();
  if (skip) return PD_OK; /* not a member */
  if (out->dtype != tensor->dtype || out->numel != tensor->numel * g->nranks)
    return pd_set_error(
        PD_ERR_SHAPE,
        "all_gather: out has dtype %s and %lld elements but %d ranks of a %s tensor of %lld elements "
        "need %lld",
        pd_dtype_name(out->dtype), (long long)out->numel, g->nranks, pd_dtype_name(tensor->dtype),
        (long long)tensor->numel, (long long)tensor->numel * g->nranks);
  coll_call *c = call_new(PD_COMM_ALL_GATHER, g);
  if (!c) return pd_last_status();
  c->in = pd_data_ptr(tensor);
  c->out = pd_data_ptr(out);
  c->count = (size_t)tensor->numel;
  c->dt = tensor->dtype;
  call_keep(c, 0, tensor);
  call_keep(c, 1, out);
  return submit(c, PD_LANE_COLL, opts ? opts->task : NULL);
}

pd_status pd_dist_all_gather_object(void **objs, size_t *lens, const void *obj, size_t len,
                                    const pd_dist_opts *opts) {
  int skip;
  if (opts && opts->task)
    return pd_set_error(PD_ERR_INVALID, "all_gather_object: only synchronous (pass no task)");
  pd_dist_group *g = group_of(opts, "all_gather_object", &skip);
  if (!g) return pd_last_status();
  if (!objs || !lens || (!obj && len))
    return pd_set_error(PD_ERR_INVALID, "all_gather_object: NULL %s",
                        !objs   ? "objs"
                        : !lens ? "lens"
                                : "obj");
  if (skip) return PD_OK;
  int n = g->nranks;
  /* lengths first, then the bytes padded to the longest (as Paddle pads) */
  int64_t mine = (int64_t)len;
  int64_t *all_len = malloc((size_t)n * sizeof *all_len);
  if (!all_len) return pd_set_error(PD_ERR_MEMORY, "all_gather_object: out of memory");
  coll_call *c = call_new(PD_COMM_ALL_GATHER, g);
  if (!c) {
    free(all_len);
    return pd_last_status();
  }
  c->in = &mine;
  c->out = all_len;
  c->count = 1;
  c->dt = PD_INT64;
  pd_status st = submit(c, PD_LANE_COLL, NULL);
  size_t maxl = 0;
  for (int i = 0; st == PD_OK && i < n; i++)
    if ((size_t)all_len[i] > maxl) maxl = (size_t)all_len[i];
  unsigned char *pad = NULL, *all = NULL;
  if (st == PD_OK) {
    pad = calloc(maxl + 1, 1);
    all = malloc(maxl * (size_t)n + 1);
    if (!pad || !all) st = pd_set_error(PD_ERR_MEMORY, "all_gather_object: out of memory");
  }
  if (st == PD_OK) {
    if (len) memcpy(pad, obj, len);
    c = call_new(PD_COMM_ALL_GATHER, g);
    if (!c) st = pd_last_status();
  }
  if (st == PD_OK) {
    c->in = pad;
    c->out = all;
    c->count = maxl;
    c->dt = PD_UINT8;
    st = submit(c, PD_LANE_COLL, NULL);
  }
  for (int i = 0; st == PD_OK && i < n; i++) {
    objs[i] = malloc((size_t)all_len[i] + 1);
    if (!objs[i]) {
      for (int k = 0; k < i; k++) free(objs[k]), objs[k] = NULL;
      st = pd_set_error(PD_ERR_MEMORY, "all_gather_object: out of memory");
      break;
    }
    memcpy(objs[i], all + (size_t)i * maxl, (size_t)all_len[i]);
    lens[i] = (size_t)all_len[i];
  }
  free(pad);
  free(all);
  free(all_len);
  return st;
}

pd_status pd_dist_reduce_scatter(pd_tensor *tensor, pd_tensor **tensor_list, pd_reduce_op op,
                                 const pd_dist_opts *opts) {
  pd_status st;
  coll_call *c = tensor_call(PD_COMM_REDUCE_SCATTER, "reduce_scatter", tensor, (int)op, 0, NULL, opts, &st);
  if (!c) return st;
  int n = c->g->nranks;
  size_t bytes = (size_t)tensor->numel * pd_dtype_size(tensor->dtype);
  if (check_list_filled(tensor_list, n, "reduce_scatter") < 0 ||
      prepare_list(tensor_list, n, tensor, "reduce_scatter", "tensor_list") < 0 ||
      !(c->own_in = pack_list(tensor_list, n, bytes))) {
    call_free(c);
    return pd_last_status();
  }
  c->in = c->own_in;
  c->out = pd_data_ptr(tensor);
  return submit(c, PD_LANE_COLL, opts ? opts->task : NULL);
}

pd_status pd_dist_alltoall(pd_tensor **out_list, pd_tensor **in_list, const pd_dist_opts *opts) {
  int skip;
  pd_dist_group *g = group_of(opts, "alltoall", &skip);
  if (!g) return pd_last_status();
  if (!in_list || !out_list)
    return pd_set_error(PD_ERR_INVALID, "alltoall: %s is NULL", in_list ? "out_list" : "in_list");
  if (skip) return PD_OK; /* not a member */
  int n = g->nranks;
  for (int i = 0; i < n; i++) {
    if (check_tensor(in_list[i], "alltoall", "in_list[i]") < 0) return pd_last_status();
    if (in_list[i]->dtype != in_list[0]->dtype || in_list[i]->numel != in_list[0]->numel)
      return pd_set_error(PD_ERR_SHAPE,
                          "alltoall: in_list[%d] (%s, %lld elements) differs from in_list[0] (%s, %lld)", i,
                          pd_dtype_name(in_list[i]->dtype), (long long)in_list[i]->numel,
                          pd_dtype_name(in_list[0]->dtype), (long long)in_list[0]->numel);
  }
  if (prepare_list(out_list, n, in_list[0], "alltoall", "out_list") < 0) return pd_last_status();
  size_t count = (size_t)in_list[0]->numel, bytes = count * pd_dtype_size(in_list[0]->dtype);
  coll_call *c = call_new(PD_COMM_ALLTOALL, g);
  if (!c) return pd_last_status();
  c->own_in = pack_list(in_list, n, bytes);
  c->counts = malloc(2 * (size_t)n * sizeof *c->counts);
  if (!c->own_in || !c->counts || set_unpack(c, out_list, n, bytes) < 0) {
    call_free(c);
    return pd_last_status() < 0 ? pd_last_status() : pd_set_error(PD_ERR_MEMORY, "alltoall: out of memory");
  }
  c->in = c->own_in;
  for (int i = 0; i < n; i++) c->counts[i] = c->counts[n + i] = count;
  c->dt = in_list[0]->dtype;
  return submit(c, PD_LANE_COLL, opts ? opts->task : NULL);
}

/* Split sizes along axis 0 (NULL: equal) as element counts per rank. */
static pd_status split_counts(const pd_tensor *t, const int64_t *sizes, int n, size_t *counts,
                              const char *what) {
  int64_t rows = t->ndim ? t->shape[0] : 1, row = rows ? t->numel / rows : 0;
  if (!sizes) {
    if (rows % n)
      return pd_set_error(PD_ERR_SHAPE,
                          "alltoall_single: %s has %lld rows, not divisible by the group size %d", what,
                          (long long)rows, n);
    for (int i = 0; i < n; i++) counts[i] = (size_t)(rows / n * row);
    return PD_OK;
  }
  int64_t total = 0;
  for (int i = 0; i < n; i++) {
    if (sizes[i] < 0)
      return pd_set_error(PD_ERR_INVALID, "alltoall_single: %s split size [%d] is %lld", what, i,
                          (long long)sizes[i]);
    total += sizes[i];
    counts[i] = (size_t)(sizes[i] * row);
  }
  if (total != rows)
    return pd_set_error(PD_ERR_SHAPE, "alltoall_single: %s split sizes sum to %lld but it has %lld rows",
                        what, (long long)total, (long long)rows);
  return PD_OK;
}

pd_status pd_dist_alltoall_single(pd_tensor *out, pd_tensor *in, const int64_t *in_split_sizes,
                                  const int64_t *out_split_sizes, const pd_dist_opts *opts) {
  int skip;
  pd_dist_group *g = group_of(opts, "alltoall_single", &skip);
  if (!g || check_tensor(in, "alltoall_single", "in") < 0 || check_tensor(out, "alltoall_single", "out") < 0)
    return pd_last_status();
  if (skip) return PD_OK; /* not a member */
  if (in->dtype != out->dtype)
    return pd_set_error(PD_ERR_DTYPE, "alltoall_single: in is %s but out is %s", pd_dtype_name(in->dtype),
                        pd_dtype_name(out->dtype));
  int n = g->nranks;
  coll_call *c = call_new(PD_COMM_ALLTOALL, g);
  if (!c) return pd_last_status();
  c->counts = malloc(2 * (size_t)n * sizeof *c->counts);
  if (!c->counts) {
    call_free(c);
    return pd_set_error(PD_ERR_MEMORY, "alltoall_single: out of memory");
  }
  if (split_counts(in, in_split_sizes, n, c->counts, "in") < 0 ||
      split_counts(out, out_split_sizes, n, c->counts + n, "out") < 0) {
    call_free(c);
    return pd_last_status();
  }
  c->in = pd_data_ptr(in);
  c->out = pd_data_ptr(out);
  c->dt = in->dtype;
  call_keep(c, 0, in);
  call_keep(c, 1, out);
  return submit(c, PD_LANE_COLL, opts ? opts->task : NULL);
}

pd_status pd_dist_scatter(pd_tensor *tensor, pd_tensor **tensor_list, int src, const pd_dist_opts *opts) {
  pd_status st;
  coll_call *c = tensor_call(PD_COMM_SCATTER, "scatter", tensor, -1, src, "src", opts, &st);
  if (!c) return st;
  int n = c->g->nranks;
  if (c->g->rank == c->root) {
    size_t bytes = (size_t)tensor->numel * pd_dtype_size(tensor->dtype);
    if (!tensor_list) {
      call_free(c);
      return pd_set_error(PD_ERR_INVALID, "scatter: the source rank %d needs tensor_list", src);
    }
    if (check_list_filled(tensor_list, n, "scatter") < 0 ||
        prepare_list(tensor_list, n, tensor, "scatter", "tensor_list") < 0 ||
        !(c->own_in = pack_list(tensor_list, n, bytes))) {
      call_free(c);
      return pd_last_status();
    }
    c->in = c->own_in;
  }
  c->out = pd_data_ptr(tensor);
  return submit(c, PD_LANE_COLL, opts ? opts->task : NULL);
}

pd_status pd_dist_gather(pd_tensor *tensor, pd_tensor **gather_list, int dst, const pd_dist_opts *opts) {
  pd_status st;
  coll_call *c = tensor_call(PD_COMM_GATHER, "gather", tensor, -1, dst, "dst", opts, &st);
  if (!c) return st;
  if (c->g->rank == c->root) {
    size_t bytes = (size_t)tensor->numel * pd_dtype_size(tensor->dtype);
    if (!gather_list) {
      call_free(c);
      return pd_set_error(PD_ERR_INVALID, "gather: the destination rank %d needs gather_list", dst);
    }
    if (prepare_list(gather_list, c->g->nranks, tensor, "gather", "gather_list") < 0 ||
        set_unpack(c, gather_list, c->g->nranks, bytes) < 0) {
      call_free(c);
      return pd_last_status();
    }
  }
  c->in = pd_data_ptr(tensor);
  return submit(c, PD_LANE_COLL, opts ? opts->task : NULL);
}

static pd_status p2p(pd_tensor *tensor, int peer, pd_dist_group *group, pd_dist_task **task, int is_send) {
  const char *name = is_send ? "send" : "recv";
  pd_dist_group *g = pd_dist_resolve_group(group, name);
  if (task) *task = NULL;
  if (!g || check_tensor(tensor, name, "tensor") < 0) return pd_last_status();
  if (g->rank < 0) return PD_OK;
  int r = group_rank_of(g, peer, name, is_send ? "dst" : "src");
  if (r < 0) return pd_last_status();
  if (r == g->rank) return pd_set_error(PD_ERR_INVALID, "%s: rank %d cannot %s itself", name, peer, name);
  coll_call *c = call_new(is_send ? PD_COMM_SEND : PD_COMM_RECV, g);
  if (!c) return pd_last_status();
  if (is_send)
    c->in = pd_data_ptr(tensor);
  else
    c->out = pd_data_ptr(tensor);
  c->count = (size_t)tensor->numel;
  c->dt = tensor->dtype;
  c->root = r;
  call_keep(c, 0, tensor);
  return submit(c, is_send ? PD_LANE_SEND : PD_LANE_RECV, task);
}

pd_status pd_dist_send(pd_tensor *tensor, int dst, const pd_dist_opts *opts) {
  return p2p(tensor, dst, opts ? opts->group : NULL, opts ? opts->task : NULL, 1);
}
pd_status pd_dist_recv(pd_tensor *tensor, int src, const pd_dist_opts *opts) {
  return p2p(tensor, src, opts ? opts->group : NULL, opts ? opts->task : NULL, 0);
}
pd_status pd_dist_isend(pd_tensor *tensor, int dst, pd_dist_group *group, pd_dist_task **task) {
  if (!task) return pd_set_error(PD_ERR_INVALID, "isend: task is NULL (isend is asynchronous)");
  return p2p(tensor, dst, group, task, 1);
}
pd_status pd_dist_irecv(pd_tensor *tensor, int src, pd_dist_group *group, pd_dist_task **task) {
  if (!task) return pd_set_error(PD_ERR_INVALID, "irecv: task is NULL (irecv is asynchronous)");
  return p2p(tensor, src, group, task, 0);
}

pd_status pd_dist_barrier(pd_dist_group *group) {
  pd_dist_group *g = pd_dist_resolve_group(group, "barrier");
  if (!g) return pd_last_status();
  if (g->rank < 0) return PD_OK;
  coll_call *c = call_new(PD_COMM_BARRIER, g);
  if (!c) return pd_last_status();
  return submit(c, PD_LANE_COLL, NULL);
}

/* ---- collectives along a dim (blocked buffers) ---- */
/* The elements before dim (the rows of its blocks). */
static size_t rows_before(const pd_tensor *t, int dim) {
  size_t r = 1;
  for (int k = 0; k < dim; k++) r *= (size_t)t->shape[k];
  return r;
}

/* big equals small but for dim, which is n times small's. */
static pd_status check_dim_pair(const char *op, const pd_tensor *big, const char *big_name,
                                const pd_tensor *small, const char *small_name, int dim, int n) {
  if (big->dtype != small->dtype)
    return pd_set_error(PD_ERR_DTYPE, "%s: %s is %s but %s is %s", op, big_name, pd_dtype_name(big->dtype),
                        small_name, pd_dtype_name(small->dtype));
  if (dim < 0 || dim >= small->ndim)
    return pd_set_error(PD_ERR_INVALID, "%s: dim %d is out of range for a %d-d %s", op, dim, small->ndim,
                        small_name);
  bool ok = big->ndim == small->ndim;
  for (int k = 0; ok && k < small->ndim; k++)
    ok = big->shape[k] == (k == dim ? (int64_t)n * small->shape[k] : small->shape[k]);
  if (!ok)
    return pd_set_error(PD_ERR_SHAPE,
                        "%s: %s has shape %s and %s %s, but along dim %d over %d ranks %s must be %s's "
                        "shape with dim %d %d times as long",
                        op, small_name, PD_SHAPE_STR(small), big_name, PD_SHAPE_STR(big), dim, n, big_name,
                        small_name, dim, n);
  return PD_OK;
}

/* The start the collectives along a dim share: the group (NULL with
 * *st = PD_OK for a non-member), both tensors checked. */
static pd_dist_group *dim_call_group(const char *op, pd_tensor *out, pd_tensor *in, const pd_dist_opts *opts,
                                     pd_status *st) {
  int skip;
  pd_dist_group *g = group_of(opts, op, &skip);
  *st = PD_OK;
  if (!g || check_tensor(in, op, "in") < 0 || check_tensor(out, op, "out") < 0) *st = pd_last_status();
  return *st != PD_OK || skip ? NULL : g;
}

static pd_status submit_dim_call(pd_comm_kind kind, pd_dist_group *g, pd_tensor *out, pd_tensor *in,
                                 size_t count, size_t rows, size_t out_rows, pd_reduce_op op,
                                 const pd_dist_opts *opts) {
  coll_call *c = call_new(kind, g);
  if (!c) return pd_last_status();
  c->in = pd_data_ptr(in);
  c->out = pd_data_ptr(out);
  c->count = count;
  c->rows = rows;
  c->out_rows = out_rows;
  c->dt = in->dtype;
  c->op = op;
  call_keep(c, 0, in);
  call_keep(c, 1, out);
  return submit(c, PD_LANE_COLL, opts ? opts->task : NULL);
}

pd_status pd_dist_all_gather_dim(pd_tensor *out, pd_tensor *in, int dim, const pd_dist_opts *opts) {
  pd_status st;
  pd_dist_group *g = dim_call_group("all_gather", out, in, opts, &st);
  if (!g) return st;
  if (check_dim_pair("all_gather", out, "out", in, "in", dim, g->nranks) < 0) return pd_last_status();
  size_t rows = rows_before(in, dim);
  return submit_dim_call(PD_COMM_ALL_GATHER, g, out, in, (size_t)in->numel, rows ? rows : 1, 0, PD_REDUCE_SUM,
                         opts);
}

pd_status pd_dist_reduce_scatter_dim(pd_tensor *out, pd_tensor *in, int dim, pd_reduce_op op,
                                     const pd_dist_opts *opts) {
  pd_status st;
  pd_dist_group *g = dim_call_group("reduce_scatter", out, in, opts, &st);
  if (!g) return st;
  if (check_op(op, in->dtype, "reduce_scatter") < 0 ||
      check_dim_pair("reduce_scatter", in, "in", out, "out", dim, g->nranks) < 0)
    return pd_last_status();
  size_t rows = rows_before(out, dim);
  return submit_dim_call(PD_COMM_REDUCE_SCATTER, g, out, in, (size_t)out->numel, rows ? rows : 1, 0, op,
                         opts);
}

pd_status pd_dist_alltoall_dim(pd_tensor *out, pd_tensor *in, int in_dim, int out_dim,
                               const pd_dist_opts *opts) {
  pd_status st;
  pd_dist_group *g = dim_call_group("alltoall", out, in, opts, &st);
  if (!g) return st;
  int n = g->nranks;
  if (in->dtype != out->dtype)
    return pd_set_error(PD_ERR_DTYPE, "alltoall: in is %s but out is %s", pd_dtype_name(in->dtype),
                        pd_dtype_name(out->dtype));
  if (in_dim < 0 || in_dim >= in->ndim || out_dim < 0 || out_dim >= out->ndim)
    return pd_set_error(PD_ERR_INVALID,
                        "alltoall: in_dim %d of a %d-d in or out_dim %d of a %d-d out is out of range",
                        in_dim, in->ndim, out_dim, out->ndim);
  if (in->numel != out->numel || in->shape[in_dim] % n || out->shape[out_dim] % n)
    return pd_set_error(PD_ERR_SHAPE,
                        "alltoall: in %s along dim %d and out %s along dim %d must hold as many elements, "
                        "each dim a multiple of the group size %d",
                        PD_SHAPE_STR(in), in_dim, PD_SHAPE_STR(out), out_dim, n);
  size_t rows = rows_before(in, in_dim), out_rows = rows_before(out, out_dim);
  return submit_dim_call(PD_COMM_ALLTOALL, g, out, in, (size_t)in->numel / (size_t)n, rows ? rows : 1,
                         out_rows ? out_rows : 1, PD_REDUCE_SUM, opts);
}

/* ---- tensors in the shared segment ---- */
typedef struct shared_owner {
  pd_comm *comm;
} shared_owner;

/* The allocation as a task of the collective lane (sync: a stays valid). */
typedef struct alloc_call {
  pd_comm *comm;
  size_t bytes;
  void *ptr;
} alloc_call;

static pd_status run_alloc(struct pd_dist_task *t) {
  alloc_call *a = t->call;
  a->ptr = a->comm->ops->alloc_shared(a->comm, a->bytes);
  return a->ptr ? PD_OK : pd_last_status();
}

static void free_shared(void *data, void *ctx) {
  shared_owner *o = ctx;
  if (o->comm && o->comm->ops->free_shared) o->comm->ops->free_shared(o->comm, data);
  pd_comm_release(o->comm);
  free(o);
}

pd_tensor *pd_dist_alloc_shared(pd_dist_group *group, pd_dtype dtype, int ndim, const int64_t *shape) {
  pd_dist_group *g = pd_dist_resolve_group(group, "alloc_shared");
  if (!g) return NULL;
  if ((int)dtype < 0 || dtype >= PD_NUM_DTYPES) {
    pd_set_error(PD_ERR_DTYPE, "alloc_shared: invalid dtype %d", (int)dtype);
    return NULL;
  }
  if (ndim < 0 || ndim > PD_MAX_DIMS || (ndim && !shape)) {
    pd_set_error(PD_ERR_SHAPE, "alloc_shared: bad ndim %d", ndim);
    return NULL;
  }
  int64_t numel = 1;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0) {
      pd_set_error(PD_ERR_SHAPE, "alloc_shared: dimension %d is %lld", i, (long long)shape[i]);
      return NULL;
    }
    numel *= shape[i];
  }
  size_t bytes = (size_t)numel * pd_dtype_size(dtype);
  if (g->rank < 0 || !g->comm->ops->alloc_shared) {
    pd_tensor *t = pd_tensor_new(dtype, ndim, shape);
    if (t) memset(pd_data_ptr(t), 0, bytes);
    return t;
  }
  shared_owner *o = malloc(sizeof *o);
  if (!o) {
    pd_set_error(PD_ERR_MEMORY, "alloc_shared: out of memory");
    return NULL;
  }
  /* collective: runs in order with the group's other collectives */
  alloc_call a = {g->comm, bytes, NULL};
  struct pd_dist_task *task = pd_dist_task_new(run_alloc, NULL, &a);
  void *p = task && pd_dist_submit(g, PD_LANE_COLL, task, NULL) == PD_OK ? a.ptr : NULL;
  if (!p) {
    free(o);
    return NULL;
  }
  o->comm = pd_comm_retain(g->comm);
  pd_tensor *t = pd_tensor_from_blob(p, dtype, ndim, shape, free_shared, o);
  if (!t) free_shared(p, o);
  return t;
}
