/* Copies between a contiguous run and a piece of a buffer laid out in
 * rows (internal to src/distributed/comm).
 *
 * A blocked buffer holds nranks blocks of rows x cols elements side by
 * side: row i of block r starts at element (i * nranks + r) * cols. It is a
 * contiguous tensor cut into nranks equal blocks along one dim (rows: the
 * product of the dims before it, cols: the block's elements per row), so a
 * collective can read or write a tensor's blocks along any dim in place
 * instead of packing them first. rows = 1 is the plain layout (block r at
 * r * cols).
 *
 * A piece here is one block: element e of it lies at
 * ((e / cols) * ld + e % cols) from its start (ld = nranks * cols).
 * cols = SIZE_MAX describes a contiguous piece. */
#ifndef PADDLEC_DIST_BLOCKED_LAYOUT_H
#define PADDLEC_DIST_BLOCKED_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "stream_copy.h"

/* Elements [off, off + len) of the piece at `piece` into dst. */
static inline void pd_blocked_read(void *dst, const void *piece, size_t cols, size_t ld, size_t off,
                                   size_t len, size_t es) {
  unsigned char *d = dst;
  const unsigned char *p = piece;
  if (!len) return;
  size_t i = off / cols, j = off % cols;
  while (len) {
    size_t m = cols - j < len ? cols - j : len;
    memcpy(d, p + (i * ld + j) * es, m * es);
    d += m * es;
    len -= m;
    i++;
    j = 0;
  }
}

/* src (len elements) into elements [off, off + len) of the piece; with
 * stream set, by streaming stores (stream_copy.h: fence before handing the
 * piece on). */
static inline void pd_blocked_write(void *piece, const void *src, size_t cols, size_t ld, size_t off,
                                    size_t len, size_t es, bool stream) {
  unsigned char *p = piece;
  const unsigned char *s = src;
  if (!len) return;
  size_t i = off / cols, j = off % cols;
  while (len) {
    size_t m = cols - j < len ? cols - j : len;
    if (stream)
      pd_stream_copy(p + (i * ld + j) * es, s, m * es);
    else
      memcpy(p + (i * ld + j) * es, s, m * es);
    s += m * es;
    len -= m;
    i++;
    j = 0;
  }
}

/* The packed form of a blocked buffer of n blocks (rows x cols each,
 * count = rows * cols elements): block j at j * count in packed, for a
 * call that takes only plain buffers. */
static inline void pd_blocked_pack(void *packed, const void *blocked, size_t n, size_t count, size_t cols,
                                   size_t es) {
  for (size_t j = 0; j < n; j++)
    pd_blocked_read((unsigned char *)packed + j * count * es, (const unsigned char *)blocked + j * cols * es,
                    cols, n * cols, 0, count, es);
}

/* The reverse: packed block r (at r * count) into block r of blocked. */
static inline void pd_blocked_unpack(void *blocked, const void *packed, size_t n, size_t count, size_t cols,
                                     size_t es) {
  for (size_t r = 0; r < n; r++)
    pd_blocked_write((unsigned char *)blocked + r * cols * es, (const unsigned char *)packed + r * count * es,
                     cols, n * cols, 0, count, es, false);
}

#endif
