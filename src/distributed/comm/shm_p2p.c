/* send / recv of the shm backend: a byte stream per ordered pair of ranks.
 * Each message starts with a header (sequence, dtype, count) that the
 * receiver checks against what it expects, so a mismatched pair is an error
 * naming both sides, not corrupted data. */
#include <stdio.h>
#include <string.h>

#include "shm_internal.h"

#define P2P_MAGIC 0x70326d73u

typedef struct p2p_header {
  uint32_t magic;
  int32_t dtype;
  uint64_t seq;
  uint64_t count;
} p2p_header;

static pd_status ring_write(shm_comm *s, shm_ring *r, const unsigned char *src, size_t n,
                            const shm_wait_ctx *w) {
  size_t cap = s->hdr->ring_bytes;
  uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
  while (n) {
    uint64_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
    if (head - tail == cap) {
      pd_status st = shm_wait_u64(s, &r->tail, head - cap + 1, w);
      if (st < 0) return st;
      continue;
    }
    size_t space = cap - (size_t)(head - tail), pos = (size_t)(head % cap);
    size_t k = n < space ? n : space;
    if (k > cap - pos) k = cap - pos;
    memcpy(r->data + pos, src, k);
    head += k;
    src += k;
    n -= k;
    atomic_store_explicit(&r->head, head, memory_order_release);
    shm_notify(s);
  }
  return PD_OK;
}

static pd_status ring_read(shm_comm *s, shm_ring *r, unsigned char *dst, size_t n, const shm_wait_ctx *w) {
  size_t cap = s->hdr->ring_bytes;
  uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
  while (n) {
    uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);
    if (head == tail) {
      pd_status st = shm_wait_u64(s, &r->head, tail + 1, w);
      if (st < 0) return st;
      continue;
    }
    size_t avail = (size_t)(head - tail), pos = (size_t)(tail % cap);
    size_t k = n < avail ? n : avail;
    if (k > cap - pos) k = cap - pos;
    memcpy(dst, r->data + pos, k);
    tail += k;
    dst += k;
    n -= k;
    atomic_store_explicit(&r->tail, tail, memory_order_release);
    shm_notify(s);
  }
  return PD_OK;
}

static void p2p_what(char *buf, size_t cap, const char *verb, pd_dtype dt, size_t count, const char *dir,
                     int peer) {
  snprintf(buf, cap, "%s(%s, %zu elements) %s rank %d", verb, pd_dtype_name(dt), count, dir, peer);
}

pd_status shm_send(pd_comm *c, const void *buf, size_t count, pd_dtype dt, int peer) {
  shm_comm *s = (shm_comm *)c;
  pd_status st = pd_comm_check_broken(c, "send");
  if (st < 0) return st;
  char what[160];
  p2p_what(what, sizeof what, "send", dt, count, "to", c->global_ranks[peer]);
  shm_wait_ctx w = {what, NULL, peer};
  p2p_header h = {P2P_MAGIC, dt, ++s->p2p_sent_seq[peer], count};
  shm_ring *r = shm_ring_at(s, c->rank, peer);
  if ((st = ring_write(s, r, (const unsigned char *)&h, sizeof h, &w)) < 0) return st;
  return ring_write(s, r, buf, count * pd_dtype_size(dt), &w);
}

pd_status shm_recv(pd_comm *c, void *buf, size_t count, pd_dtype dt, int peer) {
  shm_comm *s = (shm_comm *)c;
  pd_status st = pd_comm_check_broken(c, "recv");
  if (st < 0) return st;
  char what[160];
  p2p_what(what, sizeof what, "recv", dt, count, "from", c->global_ranks[peer]);
  shm_wait_ctx w = {what, NULL, peer};
  p2p_header h;
  shm_ring *r = shm_ring_at(s, peer, c->rank);
  if ((st = ring_read(s, r, (unsigned char *)&h, sizeof h, &w)) < 0) return st;
  uint64_t want = ++s->p2p_recv_seq[peer];
  if (h.magic != P2P_MAGIC || h.seq != want || h.count != count || h.dtype != (int32_t)dt) {
    pd_set_error(
        PD_ERR_COMM,
        "shm send/recv mismatch on group %d: rank %d sent message #%llu as %s with %llu elements but rank %d "
        "expects message #%llu as %s with %zu elements",
        c->group_id, c->global_ranks[peer], (unsigned long long)h.seq, pd_dtype_name((pd_dtype)h.dtype),
        (unsigned long long)h.count, c->global_ranks[c->rank], (unsigned long long)want, pd_dtype_name(dt),
        count);
    return shm_fail(s);
  }
  return ring_read(s, r, buf, count * pd_dtype_size(dt), &w);
}
