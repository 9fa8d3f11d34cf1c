/* The collectives of the shm backend (layout and the staging rule in
 * shm_internal.h). Payloads up to SHM_SMALL_BYTES travel inside the control
 * blocks with a single barrier; larger ones move through the staging halves
 * in chunks; all_reduce and reduce on memory from pd_dist_alloc_shared read
 * and write the peers' buffers directly (no staging, no chunks). */
#include <stdlib.h>
#include <string.h>

#include "../../kernels/cpu/comm_reduce.h"
#include "blocked_layout.h"
#include "stream_copy.h"
#include "shm_internal.h"

#define ELEM_ALIGN 16     /* slice boundaries on 64-byte lines for 4-byte dtypes */
#define DIRECT_BLOCK 2048 /* elements reduced then copied while in L1 */

static shm_post make_post(shm_comm *s, pd_comm_kind kind, pd_dtype dt, size_t count, int op, int root) {
  shm_post p;
  memset(&p, 0, sizeof p);
  p.sig.seq = ++s->base.seq;
  p.sig.kind = kind;
  p.sig.dtype = dt;
  p.sig.count = count;
  p.sig.op = op;
  p.sig.root = root;
  p.zc_alloc = -1;
  return p;
}

static shm_wait_ctx data_ctx(const shm_post *p) { return (shm_wait_ctx){NULL, &p->sig, -1}; }

/* Rank r's slice [lo, hi) of a chunk of len elements. */
static void slice_of(size_t len, int n, int r, size_t *lo, size_t *hi) {
  size_t per = (len + (size_t)n - 1) / (size_t)n;
  per = (per + ELEM_ALIGN - 1) / ELEM_ALIGN * ELEM_ALIGN;
  *lo = (size_t)r * per < len ? (size_t)r * per : len;
  *hi = *lo + per < len ? *lo + per : len;
}

static unsigned char *my_small(shm_comm *s, const shm_post *p) {
  return s->ctl[s->base.rank].small[p->sig.seq & 1];
}
static const unsigned char *small_of(shm_comm *s, int r, const shm_post *p) {
  return s->ctl[r].small[p->sig.seq & 1];
}

/* Every rank posted the same zero-copy location. */
static int all_zero_copy(shm_comm *s, const shm_post *me) {
  if (me->zc_alloc < 0) return 0;
  for (int r = 0; r < s->base.nranks; r++) {
    const shm_post *p = &s->ctl[r].post[me->sig.seq & 1];
    if (p->zc_alloc != me->zc_alloc || p->zc_off != me->zc_off) return 0;
  }
  return 1;
}
static int any_zero_copy(shm_comm *s, const shm_post *me) {
  for (int r = 0; r < s->base.nranks; r++)
    if (s->ctl[r].post[me->sig.seq & 1].zc_alloc >= 0) return 1;
  return 0;
}

/* Copies a chunk into this rank's staging half, all but its own slice: the
 * rank reads its own slice straight from its input when it reduces. */
static void copy_in_others(shm_comm *s, uint64_t step, const void *in, size_t off, size_t len, size_t es) {
  int n = s->base.nranks, me = s->base.rank;
  for (int r = 0; r < n; r++) {
    if (r == me) continue;
    size_t lo, hi;
    slice_of(len, n, r, &lo, &hi);
    if (hi > lo) memcpy(shm_stage(s, me, step) + lo * es, (const char *)in + (off + lo) * es, (hi - lo) * es);
  }
}

/* all_reduce and reduce on memory every rank mapped (pd_dist_alloc_shared,
 * same allocation and offset on every rank): rank r reduces slice r of the
 * whole buffer, reading every rank's block, and writes the result into the
 * block of every rank that keeps it (all ranks, or the root), block by block
 * while it is in L1. The slices are disjoint, so no rank reads what another
 * writes; one barrier at the end, after which every result is in place. No
 * staging and no chunking: the data moves once (read every input once,
 * write every output once), with two barriers in all where the staged path
 * needs two per chunk. Non-root buffers of a reduce stay untouched. */
static pd_status reduce_zero_copy(shm_comm *s, const shm_post *post, const shm_alloc *za, size_t count,
                                  pd_dtype dt, pd_reduce_op op, int root, const void **srcs) {
  int n = s->base.nranks, me = s->base.rank;
  size_t es = pd_dtype_size(dt), lo, hi;
  slice_of(count, n, me, &lo, &hi);
  const unsigned char *blocks = za->base + post->zc_off;
  /* the first keeper's block receives the reduction, the others a copy */
  int first = root < 0 ? me : root;
  for (size_t b = lo; b < hi; b += DIRECT_BLOCK) {
    size_t m = hi - b < DIRECT_BLOCK ? hi - b : DIRECT_BLOCK;
    for (int r = 0; r < n; r++) srcs[r] = blocks + (size_t)r * za->block_bytes + b * es;
    unsigned char *dst = (unsigned char *)blocks + (size_t)first * za->block_bytes + b * es;
    pdk_comm_reduce(dst, srcs, n, m, dt, pd_comm_kernel_op(op));
    if (root >= 0) continue;
    for (int r = 0; r < n; r++)
      if (r != first) memcpy((unsigned char *)blocks + (size_t)r * za->block_bytes + b * es, dst, m * es);
  }
  /* peers read and write this rank's block until they pass this barrier */
  shm_wait_ctx w = data_ctx(post);
  return shm_barrier(s, &w);
}

/* all_reduce and reduce: reduce-scatter then all-gather over the staging
 * halves (or the peers' shared buffers); root < 0 gathers everywhere. */
static pd_status reduce_common(shm_comm *s, shm_post *post, const void *in, void *out, size_t count,
                               pd_dtype dt, pd_reduce_op op, int root) {
  int n = s->base.nranks, me = s->base.rank;
  size_t es = pd_dtype_size(dt), bytes = count * es;
  const void *srcs_small[64];
  const void **srcs = n <= 64 ? srcs_small : malloc((size_t)n * sizeof *srcs);
  if (!srcs) return pd_set_error(PD_ERR_MEMORY, "shm all_reduce: out of memory");
  pd_status st = PD_OK;
  shm_wait_ctx w = data_ctx(post);
  if (bytes <= SHM_SMALL_BYTES) {
    memcpy(my_small(s, post), in, bytes);
    if ((st = shm_enter(s, post)) < 0) goto done;
    if (root < 0 || root == me) {
      for (int r = 0; r < n; r++) srcs[r] = small_of(s, r, post);
      pdk_comm_reduce(out, srcs, n, count, dt, pd_comm_kernel_op(op));
    }
    goto done;
  }
  uint64_t zc_off = 0;
  int zc_alloc = in == out ? shm_find_alloc(s, out, bytes, &zc_off) : -1;
  if (zc_alloc >= 0) {
    post->zc_alloc = (int64_t)s->allocs[zc_alloc].id;
    post->zc_off = zc_off;
  }
  size_t ce = s->chunk_bytes / es;
  size_t len0 = count < ce ? count : ce;
  /* out of place, a large result goes out by streaming stores (in place,
   * every line written was just read: it is in the cache) */
  bool stream = in != out && bytes >= SHM_STREAM_BYTES && (root < 0 || root == me);
  uint64_t step = s->step++;
  if (zc_alloc < 0) copy_in_others(s, step, in, 0, len0, es);
  if ((st = shm_enter(s, post)) < 0) goto done;
  int zc = all_zero_copy(s, post);
  if (!zc && any_zero_copy(s, post)) {
    /* some ranks skipped the copy of chunk 0 hoping for zero copy */
    if (zc_alloc >= 0) copy_in_others(s, step, in, 0, len0, es);
    if ((st = shm_barrier(s, &w)) < 0) goto done;
  }
  if (zc) {
    st = reduce_zero_copy(s, post, &s->allocs[zc_alloc], count, dt, op, root, srcs);
    goto done;
  }
  for (size_t off = 0; off < count; off += ce) {
    size_t len = count - off < ce ? count - off : ce;
    if (off) {
      step = s->step++;
      copy_in_others(s, step, in, off, len, es);
      if ((st = shm_barrier(s, &w)) < 0) goto done;
    }
    size_t lo, hi;
    slice_of(len, n, me, &lo, &hi);
    for (int r = 0; r < n; r++)
      srcs[r] = r == me ? (const unsigned char *)in + (off + lo) * es : shm_stage(s, r, step) + lo * es;
    /* a rank that keeps the result reduces its slice straight into its
     * output, block by block, and copies each block (still in L1) to its
     * staging half for the peers: no second pass over the slice */
    int direct = (root < 0 || root == me) && n <= 64;
    if (direct) {
      const void *part[64];
      for (size_t b = lo; b < hi; b += DIRECT_BLOCK) {
        size_t m = hi - b < DIRECT_BLOCK ? hi - b : DIRECT_BLOCK;
        for (int r = 0; r < n; r++) part[r] = (const char *)srcs[r] + (b - lo) * es;
        char *o = (char *)out + (off + b) * es;
        if (stream) {
          unsigned char *blk = shm_stage(s, me, step) + b * es;
          pdk_comm_reduce(blk, part, n, m, dt, pd_comm_kernel_op(op));
          pd_stream_copy(o, blk, m * es);
        } else {
          pdk_comm_reduce(o, part, n, m, dt, pd_comm_kernel_op(op));
          memcpy(shm_stage(s, me, step) + b * es, o, m * es);
        }
      }
    } else if (hi > lo) {
      pdk_comm_reduce(shm_stage(s, me, step) + lo * es, srcs, n, hi - lo, dt, pd_comm_kernel_op(op));
    }
    if ((st = shm_barrier(s, &w)) < 0) goto done;
    if (root >= 0 && root != me) continue;
    for (int r = 0; r < n; r++) {
      if (direct && r == me) continue;
      size_t rlo, rhi;
      slice_of(len, n, r, &rlo, &rhi);
      if (rhi > rlo)
        pd_blocked_write((char *)out + (off + rlo) * es, shm_stage(s, r, step) + rlo * es, SIZE_MAX, 0, 0,
                         rhi - rlo, es, stream);
    }
  }
  if (stream) pd_stream_fence();
done:
  if (n > 64) free(srcs);
  return st;
}

static pd_status shm_all_reduce(pd_comm *c, const void *in, void *out, size_t count, pd_dtype dt,
                                pd_reduce_op op) {
  shm_comm *s = (shm_comm *)c;
  shm_post post = make_post(s, PD_COMM_ALL_REDUCE, dt, count, op, -1);
  return reduce_common(s, &post, in, out, count, dt, op, -1);
}

static pd_status shm_reduce(pd_comm *c, const void *in, void *out, size_t count, pd_dtype dt, pd_reduce_op op,
                            int root) {
  shm_comm *s = (shm_comm *)c;
  shm_post post = make_post(s, PD_COMM_REDUCE, dt, count, op, root);
  return reduce_common(s, &post, in, out, count, dt, op, root);
}

static pd_status shm_broadcast(pd_comm *c, void *buf, size_t count, pd_dtype dt, int root) {
  shm_comm *s = (shm_comm *)c;
  int me = c->rank;
  shm_post post = make_post(s, PD_COMM_BROADCAST, dt, count, -1, root);
  size_t es = pd_dtype_size(dt), bytes = count * es;
  pd_status st;
  if (bytes <= SHM_SMALL_BYTES) {
    if (me == root) memcpy(my_small(s, &post), buf, bytes);
    if ((st = shm_enter(s, &post)) < 0) return st;
    if (me != root) memcpy(buf, small_of(s, root, &post), bytes);
    return PD_OK;
  }
  shm_wait_ctx w = data_ctx(&post);
  size_t ce = s->chunk_bytes / es;
  for (size_t off = 0; off < count; off += ce) {
    size_t len = count - off < ce ? count - off : ce;
    uint64_t step = s->step++;
    if (me == root) memcpy(shm_stage(s, me, step), (char *)buf + off * es, len * es);
    st = off ? shm_barrier(s, &w) : shm_enter(s, &post);
    if (st < 0) return st;
    if (me != root) memcpy((char *)buf + off * es, shm_stage(s, root, step), len * es);
  }
  return PD_OK;
}

/* out holds every rank's block in the blocked layout (rows x cols each):
 * each rank's chunk is staged once, and every rank copies the staged
 * chunks straight into their rows of its out. */
static pd_status shm_all_gather_blocked(pd_comm *c, const void *in, void *out, size_t rows, size_t cols,
                                        pd_dtype dt) {
  shm_comm *s = (shm_comm *)c;
  int n = c->nranks, me = c->rank;
  size_t count = rows * cols;
  shm_post post = make_post(s, PD_COMM_ALL_GATHER, dt, count, -1, -1);
  size_t es = pd_dtype_size(dt), bytes = count * es, ld = (size_t)n * cols;
  pd_status st;
  if (bytes <= SHM_SMALL_BYTES) {
    memcpy(my_small(s, &post), in, bytes);
    if ((st = shm_enter(s, &post)) < 0) return st;
    for (int r = 0; r < n; r++)
      pd_blocked_write((char *)out + (size_t)r * cols * es, small_of(s, r, &post), cols, ld, 0, count, es,
                       false);
    return PD_OK;
  }
  shm_wait_ctx w = data_ctx(&post);
  size_t ce = s->chunk_bytes / es;
  bool stream = (size_t)n * bytes >= SHM_STREAM_BYTES;
  for (size_t off = 0; off < count; off += ce) {
    size_t len = count - off < ce ? count - off : ce;
    uint64_t step = s->step++;
    memcpy(shm_stage(s, me, step), (const char *)in + off * es, len * es);
    st = off ? shm_barrier(s, &w) : shm_enter(s, &post);
    if (st < 0) return st;
    for (int r = 0; r < n; r++)
      pd_blocked_write((char *)out + (size_t)r * cols * es, shm_stage(s, r, step), cols, ld, off, len, es,
                       stream);
  }
  if (stream) pd_stream_fence();
  return PD_OK;
}

static pd_status shm_all_gather(pd_comm *c, const void *in, void *out, size_t count, pd_dtype dt) {
  return shm_all_gather_blocked(c, in, out, 1, count, dt);
}

/* Ranks write n pieces per step (piece j of block j, read from its rows
 * of the blocked in); reader r reduces piece r from every writer. */
static pd_status shm_reduce_scatter_blocked(pd_comm *c, const void *in, void *out, size_t rows, size_t cols,
                                            pd_dtype dt, pd_reduce_op op) {
  shm_comm *s = (shm_comm *)c;
  int n = c->nranks, me = c->rank;
  size_t count = rows * cols;
  shm_post post = make_post(s, PD_COMM_REDUCE_SCATTER, dt, count, op, -1);
  size_t es = pd_dtype_size(dt), ld = (size_t)n * cols;
  const void *srcs_small[64];
  const void **srcs = n <= 64 ? srcs_small : malloc((size_t)n * sizeof *srcs);
  if (!srcs) return pd_set_error(PD_ERR_MEMORY, "shm reduce_scatter: out of memory");
  pd_status st = PD_OK;
  if ((size_t)n * count * es <= SHM_SMALL_BYTES) {
    pd_blocked_pack(my_small(s, &post), in, (size_t)n, count, cols, es);
    if ((st = shm_enter(s, &post)) >= 0) {
      for (int r = 0; r < n; r++) srcs[r] = small_of(s, r, &post) + (size_t)me * count * es;
      pdk_comm_reduce(out, srcs, n, count, dt, pd_comm_kernel_op(op));
    }
    goto done;
  }
  shm_wait_ctx w = data_ctx(&post);
  size_t ce = s->chunk_bytes / ((size_t)n * es);
  if (ce == 0) ce = 1;
  for (size_t off = 0; off < count; off += ce) {
    size_t len = count - off < ce ? count - off : ce;
    uint64_t step = s->step++;
    unsigned char *mine = shm_stage(s, me, step);
    for (int j = 0; j < n; j++)
      pd_blocked_read(mine + (size_t)j * ce * es, (const char *)in + (size_t)j * cols * es, cols, ld, off,
                      len, es);
    st = off ? shm_barrier(s, &w) : shm_enter(s, &post);
    if (st < 0) goto done;
    for (int r = 0; r < n; r++) srcs[r] = shm_stage(s, r, step) + (size_t)me * ce * es;
    pdk_comm_reduce((char *)out + off * es, srcs, n, len, dt, pd_comm_kernel_op(op));
  }
done:
  if (n > 64) free(srcs);
  return st;
}

static pd_status shm_reduce_scatter(pd_comm *c, const void *in, void *out, size_t count, pd_dtype dt,
                                    pd_reduce_op op) {
  return shm_reduce_scatter_blocked(c, in, out, 1, count, dt, op);
}

static pd_status shm_scatter(pd_comm *c, const void *in, void *out, size_t count, pd_dtype dt, int root) {
  shm_comm *s = (shm_comm *)c;
  int n = c->nranks, me = c->rank;
  shm_post post = make_post(s, PD_COMM_SCATTER, dt, count, -1, root);
  size_t es = pd_dtype_size(dt);
  pd_status st;
  if ((size_t)n * count * es <= SHM_SMALL_BYTES) {
    if (me == root) memcpy(my_small(s, &post), in, (size_t)n * count * es);
    if ((st = shm_enter(s, &post)) < 0) return st;
    memcpy(out, small_of(s, root, &post) + (size_t)me * count * es, count * es);
    return PD_OK;
  }
  shm_wait_ctx w = data_ctx(&post);
  size_t ce = s->chunk_bytes / ((size_t)n * es);
  if (ce == 0) ce = 1;
  for (size_t off = 0; off < count; off += ce) {
    size_t len = count - off < ce ? count - off : ce;
    uint64_t step = s->step++;
    if (me == root)
      for (int j = 0; j < n; j++)
        memcpy(shm_stage(s, me, step) + (size_t)j * ce * es,
               (const char *)in + ((size_t)j * count + off) * es, len * es);
    st = off ? shm_barrier(s, &w) : shm_enter(s, &post);
    if (st < 0) return st;
    memcpy((char *)out + off * es, shm_stage(s, root, step) + (size_t)me * ce * es, len * es);
  }
  return PD_OK;
}

static pd_status shm_gather(pd_comm *c, const void *in, void *out, size_t count, pd_dtype dt, int root) {
  shm_comm *s = (shm_comm *)c;
  int n = c->nranks, me = c->rank;
  shm_post post = make_post(s, PD_COMM_GATHER, dt, count, -1, root);
  size_t es = pd_dtype_size(dt), bytes = count * es;
  pd_status st;
  if (bytes <= SHM_SMALL_BYTES) {
    memcpy(my_small(s, &post), in, bytes);
    if ((st = shm_enter(s, &post)) < 0) return st;
    if (me == root)
      for (int r = 0; r < n; r++) memcpy((char *)out + (size_t)r * bytes, small_of(s, r, &post), bytes);
    return PD_OK;
  }
  shm_wait_ctx w = data_ctx(&post);
  size_t ce = s->chunk_bytes / es;
  for (size_t off = 0; off < count; off += ce) {
    size_t len = count - off < ce ? count - off : ce;
    uint64_t step = s->step++;
    memcpy(shm_stage(s, me, step), (const char *)in + off * es, len * es);
    st = off ? shm_barrier(s, &w) : shm_enter(s, &post);
    if (st < 0) return st;
    if (me == root)
      for (int r = 0; r < n; r++)
        memcpy((char *)out + ((size_t)r * count + off) * es, shm_stage(s, r, step), len * es);
  }
  return PD_OK;
}

/* Where alltoall's pieces lie in a buffer: piece j at base + at[j] bytes,
 * contiguous, when `at` is set; else block j of the blocked layout. */
typedef struct a2a_side {
  unsigned char *base;
  const size_t *at;
  size_t cols, ld; /* the blocked layout (at == NULL) */
} a2a_side;

static unsigned char *piece_of(const a2a_side *sd, int j, size_t es) {
  return sd->base + (sd->at ? sd->at[j] : (size_t)j * sd->cols * es);
}

/* Elements of a piece of cnt that round k (slot_e each) moves. */
static size_t round_len(size_t cnt, size_t k, size_t slot_e) {
  if (k * slot_e >= cnt) return 0;
  return cnt - k * slot_e < slot_e ? cnt - k * slot_e : slot_e;
}

/* alltoall(v): rounds of one staging slot per destination. The number of
 * rounds follows the largest piece any rank sends to one peer (posted in
 * aux); the counts are checked pairwise (posted in the small area). Each
 * round copies the next slot of every piece straight from and into its
 * place in the caller's buffers. */
static pd_status alltoall_pieces(shm_comm *s, const a2a_side *in, const size_t *send_counts,
                                 const a2a_side *out, const size_t *recv_counts, pd_dtype dt) {
  pd_comm *c = &s->base;
  int n = c->nranks, me = c->rank;
  size_t es = pd_dtype_size(dt);
  shm_post post = make_post(s, PD_COMM_ALLTOALL, dt, 0, -1, -1);
  uint64_t *posted = (uint64_t *)my_small(s, &post);
  size_t maxe = 0;
  for (int j = 0; j < n; j++) {
    posted[j] = send_counts[j];
    if (send_counts[j] > maxe) maxe = send_counts[j];
  }
  post.aux = maxe * es;
  size_t slot_e = s->chunk_bytes / (size_t)n / es, slot = slot_e * es;
  uint64_t step = s->step++;
  for (int j = 0; j < n; j++)
    pd_blocked_read(shm_stage(s, me, step) + (size_t)j * slot, piece_of(in, j, es), in->cols, in->ld, 0,
                    round_len(send_counts[j], 0, slot_e), es);
  pd_status st = shm_enter(s, &post);
  if (st < 0) return st;
  size_t gmax = 0;
  for (int r = 0; r < n; r++) {
    const shm_post *p = &s->ctl[r].post[post.sig.seq & 1];
    if (p->aux > gmax) gmax = p->aux;
    uint64_t theirs = ((const uint64_t *)small_of(s, r, &post))[me];
    if (theirs != recv_counts[r]) {
      pd_set_error(
          PD_ERR_COMM,
          "shm alltoall on group %d: rank %d sends %llu elements to rank %d, which expects %zu from it",
          c->group_id, c->global_ranks[r], (unsigned long long)theirs, c->global_ranks[me], recv_counts[r]);
      return shm_fail(s);
    }
  }
  shm_wait_ctx w = data_ctx(&post);
  size_t rounds = gmax ? (gmax + slot - 1) / slot : 0, total = 0;
  for (int r = 0; r < n; r++) total += recv_counts[r];
  bool stream = total * es >= SHM_STREAM_BYTES;
  for (size_t k = 0; k < rounds; k++) {
    if (k) {
      step = s->step++;
      for (int j = 0; j < n; j++)
        pd_blocked_read(shm_stage(s, me, step) + (size_t)j * slot, piece_of(in, j, es), in->cols, in->ld,
                        k * slot_e, round_len(send_counts[j], k, slot_e), es);
      if ((st = shm_barrier(s, &w)) < 0) return st;
    }
    for (int r = 0; r < n; r++)
      pd_blocked_write(piece_of(out, r, es), shm_stage(s, r, step) + (size_t)me * slot, out->cols, out->ld,
                       k * slot_e, round_len(recv_counts[r], k, slot_e), es, stream);
  }
  if (stream) pd_stream_fence();
  return PD_OK;
}

static pd_status shm_alltoall(pd_comm *c, const void *in, const size_t *send_counts, void *out,
                              const size_t *recv_counts, pd_dtype dt) {
  shm_comm *s = (shm_comm *)c;
  int n = c->nranks;
  size_t es = pd_dtype_size(dt);
  if ((size_t)n * sizeof(uint64_t) > SHM_SMALL_BYTES)
    return pd_set_error(PD_ERR_UNIMPLEMENTED, "shm alltoall: groups of more than %zu ranks",
                        SHM_SMALL_BYTES / sizeof(uint64_t));
  size_t *soff = malloc(2 * (size_t)n * sizeof *soff), *roff = soff + n;
  if (!soff) return pd_set_error(PD_ERR_MEMORY, "shm alltoall: out of memory");
  for (size_t j = 0, so = 0, ro = 0; j < (size_t)n; j++) {
    soff[j] = so;
    roff[j] = ro;
    so += send_counts[j] * es;
    ro += recv_counts[j] * es;
  }
  a2a_side si = {(unsigned char *)(uintptr_t)in, soff, SIZE_MAX, 0}, so = {out, roff, SIZE_MAX, 0};
  pd_status st = alltoall_pieces(s, &si, send_counts, &so, recv_counts, dt);
  free(soff);
  return st;
}

static pd_status shm_alltoall_blocked(pd_comm *c, const void *in, size_t in_rows, void *out, size_t out_rows,
                                      size_t count, pd_dtype dt) {
  shm_comm *s = (shm_comm *)c;
  int n = c->nranks;
  if ((size_t)n * sizeof(uint64_t) > SHM_SMALL_BYTES)
    return pd_set_error(PD_ERR_UNIMPLEMENTED, "shm alltoall: groups of more than %zu ranks",
                        SHM_SMALL_BYTES / sizeof(uint64_t));
  size_t counts_small[64] = {0};
  size_t *counts = n <= 64 ? counts_small : malloc((size_t)n * sizeof *counts);
  if (!counts) return pd_set_error(PD_ERR_MEMORY, "shm alltoall: out of memory");
  for (int j = 0; j < n; j++) counts[j] = count;
  size_t ic = count / in_rows, oc = count / out_rows;
  a2a_side si = {(unsigned char *)(uintptr_t)in, NULL, ic, (size_t)n * ic};
  a2a_side so = {out, NULL, oc, (size_t)n * oc};
  pd_status st = alltoall_pieces(s, &si, counts, &so, counts, dt);
  if (n > 64) free(counts);
  return st;
}

static pd_status shm_barrier_op(pd_comm *c) {
  shm_comm *s = (shm_comm *)c;
  shm_post post = make_post(s, PD_COMM_BARRIER, PD_BOOL, 0, -1, -1);
  return shm_enter(s, &post);
}

static void shm_destroy(pd_comm *c) {
  shm_comm *s = (shm_comm *)c;
  shm_unmap_group(s);
  pd_comm_base_clear(c);
  free(s);
}

static const pd_comm_ops k_shm_ops = {
    .name = "shm",
    .avg_native = true,
    .all_reduce = shm_all_reduce,
    .broadcast = shm_broadcast,
    .reduce = shm_reduce,
    .all_gather = shm_all_gather,
    .reduce_scatter = shm_reduce_scatter,
    .alltoall = shm_alltoall,
    .all_gather_blocked = shm_all_gather_blocked,
    .reduce_scatter_blocked = shm_reduce_scatter_blocked,
    .alltoall_blocked = shm_alltoall_blocked,
    .scatter = shm_scatter,
    .gather = shm_gather,
    .send = shm_send,
    .recv = shm_recv,
    .barrier = shm_barrier_op,
    .alloc_shared = shm_alloc_shared,
    .free_shared = shm_free_shared,
    .destroy = shm_destroy,
};

pd_comm *pd_comm_shm_create(const pd_comm_init *init) {
  shm_comm *s = calloc(1, sizeof *s);
  if (!s) {
    pd_set_error(PD_ERR_MEMORY, "shm: out of memory");
    return NULL;
  }
  if (pd_comm_base_init(&s->base, &k_shm_ops, init) < 0 || shm_map_group(s, init) < 0) {
    shm_destroy(&s->base);
    return NULL;
  }
  return &s->base;
}
