/* NumPy .npz archives: zip files of .npy members, stored or deflated. The
 * reader walks the central directory (ZIP64 records included) and checks
 * every offset, size and CRC; the writer makes what numpy.savez and
 * numpy.savez_compressed make. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "io_internal.h"

struct pd_io_npz {
  int n;
  char **names;
  pd_tensor **tensors;
};

static uint64_t rd(const unsigned char *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

#define SIG_LOCAL 0x04034b50u
#define SIG_CENTRAL 0x02014b50u
#define SIG_EOCD 0x06054b50u
#define SIG_EOCD64 0x06064b50u
#define SIG_LOC64 0x07064b50u

void pd_io_npz_release(pd_io_npz *z) {
  if (!z) return;
  for (int i = 0; i < z->n; i++) {
    free(z->names[i]);
    pd_tensor_release(z->tensors[i]);
  }
  free(z->names);
  free(z->tensors);
  free(z);
}

/* inflates a raw deflate stream of csize bytes into exactly usize bytes */
static bool inflate_raw(const unsigned char *src, uint64_t csize, unsigned char *dst, uint64_t usize,
                        char *why, size_t whycap) {
  z_stream zs;
  memset(&zs, 0, sizeof zs);
  if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) {
    snprintf(why, whycap, "cannot start zlib's inflate");
    return false;
  }
  uint64_t in_left = csize, out_left = usize;
  zs.next_in = (Bytef *)src;
  zs.next_out = dst;
  int rc = Z_OK;
  while (rc == Z_OK) {
    if (zs.avail_in == 0 && in_left) {
      zs.avail_in = in_left > UINT_MAX ? UINT_MAX : (uInt)in_left;
      in_left -= zs.avail_in;
    }
    if (zs.avail_out == 0 && out_left) {
      zs.avail_out = out_left > UINT_MAX ? UINT_MAX : (uInt)out_left;
      out_left -= zs.avail_out;
    }
    uInt before_in = zs.avail_in, before_out = zs.avail_out;
    rc = inflate(&zs, Z_NO_FLUSH);
    if (rc == Z_BUF_ERROR || (rc == Z_OK && zs.avail_in == before_in && zs.avail_out == before_out)) break;
  }
  bool ok = rc == Z_STREAM_END && zs.total_out == usize && zs.avail_out == 0 && out_left == 0;
  if (!ok) {
    if (rc == Z_DATA_ERROR)
      snprintf(why, whycap, "corrupt deflate data (%s)", zs.msg ? zs.msg : "zlib data error");
    else if (rc == Z_STREAM_END)
      snprintf(why, whycap, "inflates to %llu bytes, the directory says %llu",
               (unsigned long long)zs.total_out, (unsigned long long)usize);
    else if (zs.avail_out == 0 && out_left == 0)
      snprintf(why, whycap, "inflates to more than the %llu bytes the directory says",
               (unsigned long long)usize);
    else
      snprintf(why, whycap, "the deflate stream ends early (truncated)");
  } else if (zs.avail_in != 0 || in_left != 0) {
    snprintf(why, whycap, "%llu bytes follow the end of the deflate stream",
             (unsigned long long)(zs.avail_in + in_left));
    ok = false;
  }
  inflateEnd(&zs);
  return ok;
}

#define BAD(...)                            \
  do {                                      \
    snprintf(why, sizeof why, __VA_ARGS__); \
    goto fail;                              \
  } while (0)

pd_io_npz *pd_io_load_npz_buffer(const void *data, size_t size, const char *name) {
  const unsigned char *b = data;
  if (!name) name = "<buffer>";
  char why[1024] = "";
  pd_io_npz *z = calloc(1, sizeof *z);
  unsigned char *tmp = NULL;
  if (!z) {
    pd_set_error(PD_ERR_MEMORY, "load_npz: out of memory");
    return NULL;
  }
  if (!data && size) BAD("data is NULL");
  /* the end of central directory record: 22 bytes and a comment that ends the file */
  if (size < 22) BAD("%zu bytes, too short for a zip file", size);
  size_t eocd = SIZE_MAX;
  size_t lowest = size - 22 > 65535 ? size - 22 - 65535 : 0;
  for (size_t q = size - 22 + 1; q-- > lowest;)
    if (rd(b + q, 4) == SIG_EOCD && q + 22 + rd(b + q + 20, 2) == size) {
      eocd = q;
      break;
    }
  if (eocd == SIZE_MAX) BAD("not a zip file (no end of central directory record)");
  uint64_t disk = rd(b + eocd + 4, 2), cd_disk = rd(b + eocd + 6, 2);
  uint64_t n_disk = rd(b + eocd + 8, 2), n_total = rd(b + eocd + 10, 2);
  uint64_t cd_size = rd(b + eocd + 12, 4), cd_off = rd(b + eocd + 16, 4);
  uint64_t cd_limit = eocd; /* the directory ends where the next record starts */
  /* ZIP64: a locator before the end record points at the 64-bit end record
   * (writers add it when a value overflows, or when they choose to) */
  bool sentinel = n_disk == 0xffff || n_total == 0xffff || cd_size == 0xffffffffu || cd_off == 0xffffffffu;
  if (eocd >= 20 && rd(b + eocd - 20, 4) == SIG_LOC64) {
    const unsigned char *loc = b + eocd - 20;
    uint64_t z64 = rd(loc + 8, 8);
    bool ok = rd(loc + 4, 4) == 0 && rd(loc + 16, 4) <= 1 && z64 <= eocd - 20 && eocd - 20 - z64 >= 56 &&
              rd(b + z64, 4) == SIG_EOCD64;
    if (ok) {
      disk = rd(b + z64 + 16, 4);
      cd_disk = rd(b + z64 + 20, 4);
      n_disk = rd(b + z64 + 24, 8);
      n_total = rd(b + z64 + 32, 8);
      cd_size = rd(b + z64 + 40, 8);
      cd_off = rd(b + z64 + 48, 8);
      cd_limit = z64;
    } else if (sentinel) {
      BAD("bad ZIP64 end of central directory locator or record (offset %llu)", (unsigned long long)z64);
    }
  } else if (sentinel) {
    BAD("ZIP64 sizes without a ZIP64 end of central directory locator");
  }
  if (disk != 0 || cd_disk != 0 || n_disk != n_total) BAD("multi-disk archives are not supported");
  if (cd_off > cd_limit || cd_size != cd_limit - cd_off)
    BAD("the central directory (offset %llu, %llu bytes) does not end where the end record starts (%llu)",
        (unsigned long long)cd_off, (unsigned long long)cd_size, (unsigned long long)cd_limit);
  if (n_total > cd_size / 46)
    BAD("%llu entries cannot fit in a %llu-byte directory", (unsigned long long)n_total,
        (unsigned long long)cd_size);
  z->names = calloc(n_total ? n_total : 1, sizeof *z->names);
  z->tensors = calloc(n_total ? n_total : 1, sizeof *z->tensors);
  if (!z->names || !z->tensors) BAD("out of memory for %llu entries", (unsigned long long)n_total);
  uint64_t p = cd_off;
  for (uint64_t e = 0; e < n_total; e++) {
    if (cd_off + cd_size - p < 46 || rd(b + p, 4) != SIG_CENTRAL)
      BAD("entry %llu of the central directory is corrupt", (unsigned long long)e);
    uint64_t flags = rd(b + p + 8, 2), method = rd(b + p + 10, 2), crc = rd(b + p + 16, 4);
    uint64_t csize = rd(b + p + 20, 4), usize = rd(b + p + 24, 4);
    uint64_t nlen = rd(b + p + 28, 2), xlen = rd(b + p + 30, 2), clen = rd(b + p + 32, 2);
    uint64_t edisk = rd(b + p + 34, 2), lho = rd(b + p + 42, 4);
    if (cd_off + cd_size - p - 46 < nlen + xlen + clen)
      BAD("entry %llu runs past the central directory", (unsigned long long)e);
    const unsigned char *fname = b + p + 46, *extra = fname + nlen;
    char ename[256];
    if (nlen == 0 || nlen >= sizeof ename)
      BAD("entry %llu has a name of %llu bytes", (unsigned long long)e, (unsigned long long)nlen);
    memcpy(ename, fname, nlen);
    ename[nlen] = '\0';
    if (memchr(ename, '\0', nlen)) BAD("entry %llu has a NUL byte in its name", (unsigned long long)e);
    /* ZIP64 extra field: the 32-bit values set to all ones, in order */
    for (uint64_t x = 0; x + 4 <= xlen;) {
      uint64_t id = rd(extra + x, 2), len = rd(extra + x + 2, 2);
      if (x + 4 + len > xlen) BAD("'%s': corrupt extra field", ename);
      if (id == 1) {
        uint64_t q = x + 4;
        uint64_t *vals[3] = {&usize, &csize, &lho};
        for (int k = 0; k < 3; k++) {
          if (*vals[k] != 0xffffffffu) continue;
          if (q + 8 > x + 4 + len) BAD("'%s': the ZIP64 extra field is too short", ename);
          *vals[k] = rd(extra + q, 8);
          q += 8;
        }
        if (edisk == 0xffff) {
          if (q + 4 > x + 4 + len) BAD("'%s': the ZIP64 extra field is too short", ename);
          edisk = rd(extra + q, 4);
        }
      }
      x += 4 + len;
    }
    if (edisk != 0) BAD("'%s': multi-disk archives are not supported", ename);
    if (flags & 1) BAD("'%s' is encrypted", ename);
    if (method != 0 && method != 8)
      BAD("'%s': compression method %llu (only stored 0 and deflate 8)", ename, (unsigned long long)method);
    /* the local header, then the data, all before the directory */
    if (lho > cd_off || cd_off - lho < 30 || rd(b + lho, 4) != SIG_LOCAL)
      BAD("'%s': no local header at offset %llu", ename, (unsigned long long)lho);
    uint64_t lnlen = rd(b + lho + 26, 2), lxlen = rd(b + lho + 28, 2);
    if (lnlen != nlen || cd_off - lho - 30 < lnlen + lxlen || memcmp(b + lho + 30, fname, nlen) != 0)
      BAD("'%s': the local header does not match the central directory", ename);
    uint64_t dpos = lho + 30 + lnlen + lxlen;
    if (csize > cd_off - dpos)
      BAD("'%s': %llu bytes of data run past the central directory (truncated archive?)", ename,
          (unsigned long long)csize);
    if (method == 0 && csize != usize)
      BAD("'%s': stored with %llu bytes but %llu uncompressed", ename, (unsigned long long)csize,
          (unsigned long long)usize);
    /* deflate expands at most ~1032:1: a bigger claim is a lie, not a reason to allocate */
    if (method == 8 && usize / 1032 > csize + 1)
      BAD("'%s': claims %llu bytes from %llu deflated", ename, (unsigned long long)usize,
          (unsigned long long)csize);
    const unsigned char *payload = b + dpos;
    if (method == 8) {
      tmp = malloc(usize ? usize : 1);
      if (!tmp) BAD("'%s': out of memory for %llu bytes", ename, (unsigned long long)usize);
      char zwhy[256];
      if (!inflate_raw(payload, csize, tmp, usize, zwhy, sizeof zwhy)) BAD("'%s': %s", ename, zwhy);
      payload = tmp;
    }
    uLong c = crc32(0L, Z_NULL, 0);
    for (uint64_t off = 0; off < usize;) {
      uInt chunk = usize - off > UINT_MAX ? UINT_MAX : (uInt)(usize - off);
      c = crc32(c, payload + off, chunk);
      off += chunk;
    }
    if (c != crc)
      BAD("'%s': CRC-32 mismatch (stored %08llx, computed %08lx)", ename, (unsigned long long)crc, c);
    if (nlen < 5 || strcmp(ename + nlen - 4, ".npy") != 0) BAD("member '%s' is not a .npy file", ename);
    ename[nlen - 4] = '\0';
    for (int k = 0; k < z->n; k++)
      if (!strcmp(z->names[k], ename)) BAD("member '%s.npy' appears twice", ename);
    char member[1024];
    snprintf(member, sizeof member, "%s:%s.npy", name, ename);
    pd_internal_enter();
    pd_tensor *t = pd_io_load_npy_buffer(payload, usize, member);
    pd_internal_leave();
    free(tmp);
    tmp = NULL;
    if (!t) {
      char msg[2048];
      pd_io_error_copy(msg, sizeof msg);
      pd_io_npz_release(z);
      pd_set_error(PD_ERR_IO, "load_npz: %s", msg);
      return NULL;
    }
    z->names[z->n] = strdup(ename);
    z->tensors[z->n] = t;
    z->n++;
    if (!z->names[z->n - 1]) BAD("out of memory");
    p += 46 + nlen + xlen + clen;
  }
  if (p != cd_off + cd_size)
    BAD("%llu bytes of the central directory follow its %llu entries",
        (unsigned long long)(cd_off + cd_size - p), (unsigned long long)n_total);
  return z;
fail:
  free(tmp);
  pd_io_npz_release(z);
  pd_set_error(PD_ERR_IO, "load_npz: '%s': %s", name, why);
  return NULL;
}

pd_io_npz *pd_io_load_npz(const char *path) {
  size_t size;
  char *buf = pd_io_read_file(path, &size, "load_npz");
  if (!buf) return NULL;
  pd_io_npz *z = pd_io_load_npz_buffer(buf, size, path);
  free(buf);
  return z;
}

int pd_io_npz_count(const pd_io_npz *z) { return z ? z->n : 0; }

const char *pd_io_npz_name(const pd_io_npz *z, int i) { return z && i >= 0 && i < z->n ? z->names[i] : NULL; }

pd_tensor *pd_io_npz_get(const pd_io_npz *z, const char *name) {
  if (!z || !name) {
    pd_set_error(PD_ERR_INVALID, "npz: get needs an archive and a name");
    return NULL;
  }
  for (int i = 0; i < z->n; i++)
    if (!strcmp(z->names[i], name)) return pd_scope_track(pd_tensor_retain(z->tensors[i]));
  char list[512] = "";
  size_t k = 0;
  for (int i = 0; i < z->n && k < sizeof list; i++)
    k += (size_t)snprintf(list + k, sizeof list - k, i ? ", %s" : "%s", z->names[i]);
  pd_set_error(PD_ERR_INDEX, "npz: no array named '%s' (the archive has: %s)", name, z->n ? list : "nothing");
  return NULL;
}

/* ---- writing -------------------------------------------------------------------- */
typedef struct wbuf {
  unsigned char *p;
  size_t n, cap;
  bool oom;
} wbuf;

static void put(wbuf *w, const void *src, size_t n) {
  if (w->oom || n == 0) return;
  if (w->n + n > w->cap) {
    size_t cap = w->cap ? w->cap : 4096;
    while (cap < w->n + n) cap *= 2;
    unsigned char *q = realloc(w->p, cap);
    if (!q) {
      w->oom = true;
      return;
    }
    w->p = q;
    w->cap = cap;
  }
  memcpy(w->p + w->n, src, n);
  w->n += n;
}

static void put_le(wbuf *w, uint64_t v, int n) {
  unsigned char b[8];
  for (int i = 0; i < n; i++) b[i] = (unsigned char)(v >> (8 * i));
  put(w, b, (size_t)n);
}

static bool deflate_raw(const unsigned char *src, size_t n, unsigned char **out, size_t *outn) {
  z_stream zs;
  memset(&zs, 0, sizeof zs);
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    return false;
  uLong bound = deflateBound(&zs, (uLong)n);
  unsigned char *buf = malloc(bound ? bound : 1);
  if (!buf) {
    deflateEnd(&zs);
    return false;
  }
  zs.next_in = (Bytef *)src;
  zs.avail_in = (uInt)n;
  zs.next_out = buf;
  zs.avail_out = (uInt)bound;
  int rc = deflate(&zs, Z_FINISH);
  *outn = zs.total_out;
  deflateEnd(&zs);
  if (rc != Z_STREAM_END) {
    free(buf);
    return false;
  }
  *out = buf;
  return true;
}

pd_status pd_io_save_npz(const char *path, const char *const *names, pd_tensor *const *tensors, int n,
                         bool compress) {
  if (n < 0 || (n > 0 && (!names || !tensors)) || n > 65535)
    return pd_set_error(PD_ERR_INVALID, "save_npz: needs 0 to 65535 names and tensors (n = %d)", n);
  for (int i = 0; i < n; i++) {
    if (!names[i] || !names[i][0] || strlen(names[i]) > 250)
      return pd_set_error(PD_ERR_INVALID, "save_npz: name %d is empty, NULL or longer than 250 bytes", i);
    for (int k = 0; k < i; k++)
      if (!strcmp(names[i], names[k]))
        return pd_set_error(PD_ERR_INVALID, "save_npz: name '%s' given twice", names[i]);
  }
  wbuf w = {0}, cd = {0};
  pd_status st = PD_OK;
  for (int i = 0; i < n && st == PD_OK; i++) {
    unsigned char *npy = NULL, *zdata = NULL;
    size_t npy_n = 0, z_n = 0;
    st = pd_io_npy_encode(tensors[i], &npy, &npy_n, "save_npz");
    if (st < 0) break;
    if (compress && !deflate_raw(npy, npy_n, &zdata, &z_n)) {
      free(npy);
      st = pd_set_error(PD_ERR_MEMORY, "save_npz: cannot deflate '%s' (%zu bytes)", names[i], npy_n);
      break;
    }
    const unsigned char *payload = compress ? zdata : npy;
    size_t pn = compress ? z_n : npy_n;
    if (npy_n >= 0xffffffffu || pn >= 0xffffffffu || w.n >= 0xffffffffu) {
      free(npy);
      free(zdata);
      st = pd_set_error(PD_ERR_UNIMPLEMENTED,
                        "save_npz: '%s' or the archive exceeds 4 GiB (ZIP64 not written)", names[i]);
      break;
    }
    uLong crc = crc32(crc32(0L, Z_NULL, 0), npy, (uInt)npy_n);
    char fname[300];
    int fl = snprintf(fname, sizeof fname, "%s.npy", names[i]);
    uint64_t lho = w.n;
    int method = compress ? 8 : 0;
    /* local header */
    put_le(&w, SIG_LOCAL, 4);
    put_le(&w, 20, 2); /* version needed */
    put_le(&w, 0, 2);  /* flags */
    put_le(&w, (uint64_t)method, 2);
    put_le(&w, 0, 2);            /* time */
    put_le(&w, (1 << 5) | 1, 2); /* date: 1980-01-01 */
    put_le(&w, crc, 4);
    put_le(&w, pn, 4);
    put_le(&w, npy_n, 4);
    put_le(&w, (uint64_t)fl, 2);
    put_le(&w, 0, 2);
    put(&w, fname, (size_t)fl);
    put(&w, payload, pn);
    /* its central directory entry */
    put_le(&cd, SIG_CENTRAL, 4);
    put_le(&cd, 20, 2); /* made by */
    put_le(&cd, 20, 2);
    put_le(&cd, 0, 2);
    put_le(&cd, (uint64_t)method, 2);
    put_le(&cd, 0, 2);
    put_le(&cd, (1 << 5) | 1, 2);
    put_le(&cd, crc, 4);
    put_le(&cd, pn, 4);
    put_le(&cd, npy_n, 4);
    put_le(&cd, (uint64_t)fl, 2);
    put_le(&cd, 0, 2); /* extra */
    put_le(&cd, 0, 2); /* comment */
    put_le(&cd, 0, 2); /* disk */
    put_le(&cd, 0, 2); /* internal attributes */
    put_le(&cd, 0, 4); /* external attributes */
    put_le(&cd, lho, 4);
    put(&cd, fname, (size_t)fl);
    free(npy);
    free(zdata);
  }
  if (st == PD_OK) {
    uint64_t cd_off = w.n;
    put(&w, cd.p, cd.n);
    put_le(&w, SIG_EOCD, 4);
    put_le(&w, 0, 2);
    put_le(&w, 0, 2);
    put_le(&w, (uint64_t)n, 2);
    put_le(&w, (uint64_t)n, 2);
    put_le(&w, cd.n, 4);
    put_le(&w, cd_off, 4);
    put_le(&w, 0, 2);
    if (w.oom || cd.oom || cd_off >= 0xffffffffu)
      st = pd_set_error(PD_ERR_MEMORY, "save_npz: out of memory building '%s'", path ? path : "NULL");
    else
      st = pd_io_write_file(path, w.p, w.n, "save_npz");
  }
  free(w.p);
  free(cd.p);
  return st;
}
