/* A copy whose stores bypass the caches (internal to src/distributed/comm).
 *
 * For a large result the copying rank does not read again soon: its lines
 * are not read from memory before they are written (no read for
 * ownership) and do not evict what the collective has still to read. The
 * stores are weakly ordered: pd_stream_fence before the data is handed to
 * another thread or process. Plain memcpy where SSE2 is missing. */
#ifndef PADDLEC_DIST_STREAM_COPY_H
#define PADDLEC_DIST_STREAM_COPY_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

static inline void pd_stream_copy(void *dst, const void *src, size_t bytes) {
#if defined(__SSE2__)
  unsigned char *d = dst;
  const unsigned char *s = src;
  size_t head = (16 - ((uintptr_t)d & 15)) & 15;
  if (head > bytes) head = bytes;
  memcpy(d, s, head);
  d += head, s += head, bytes -= head;
  for (; bytes >= 64; d += 64, s += 64, bytes -= 64) {
    __m128i a = _mm_loadu_si128((const __m128i *)s), b = _mm_loadu_si128((const __m128i *)(s + 16));
    __m128i c = _mm_loadu_si128((const __m128i *)(s + 32)), e = _mm_loadu_si128((const __m128i *)(s + 48));
    _mm_stream_si128((__m128i *)d, a);
    _mm_stream_si128((__m128i *)(d + 16), b);
    _mm_stream_si128((__m128i *)(d + 32), c);
    _mm_stream_si128((__m128i *)(d + 48), e);
  }
  memcpy(d, s, bytes);
#else
  memcpy(dst, src, bytes);
#endif
}

static inline void pd_stream_fence(void) {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

#endif
