/* Printing like Paddle's Tensor.__str__ (python/paddle/tensor/to_string.py):
 * per-item format ("1." for integral floats, so also "inf."; %.8f otherwise),
 * items left-justified to one width with a sign column when any is negative
 * (width and sign taken over the 3 edge items of every dim, as Paddle's
 * _get_max_width(_to_summary(x))), 80-column lines, and "..." summaries past
 * 1000 elements (3 edge items). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tensor_impl.h"

static int g_precision = 8;
#define THRESHOLD 1000
#define EDGE 3
#define LINEWIDTH 80

void pd_set_print_precision(int digits) {
  if (digits >= 0 && digits <= 30) g_precision = digits;
}

typedef struct sbuf {
  char *p;
  size_t n, cap;
  bool oom;
} sbuf;

static void put(sbuf *b, const char *s, size_t len) {
  if (b->oom) return;
  if (b->n + len + 1 > b->cap) {
    size_t cap = (b->cap ? b->cap * 2 : 256) + len;
    char *p = realloc(b->p, cap);
    if (!p) {
      b->oom = true;
      return;
    }
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->n, s, len);
  b->n += len;
  b->p[b->n] = 0;
}
static void puts_(sbuf *b, const char *s) { put(b, s, strlen(s)); }
static void spaces(sbuf *b, int n) {
  for (int i = 0; i < n; i++) put(b, " ", 1);
}

/* Reads one element: as an exact integer for integer/bool dtypes (int64
 * beyond 2^53 must print exactly), as double otherwise. */
typedef struct item {
  double v;
  long long i;
} item;

static item load_item(const pd_tensor *t, const char *p) {
  item it = {0};
  switch (t->dtype) {
    case PD_BOOL:
      it.i = *(const uint8_t *)p != 0;
      break;
    case PD_UINT8:
      it.i = *(const uint8_t *)p;
      break;
    case PD_INT8:
      it.i = *(const int8_t *)p;
      break;
    case PD_INT16:
      it.i = *(const int16_t *)p;
      break;
    case PD_INT32:
      it.i = *(const int32_t *)p;
      break;
    case PD_INT64:
      it.i = *(const int64_t *)p;
      break;
    default:
      it.v = pd_load_as_f64(p, t->dtype);
      return it;
  }
  it.v = (double)it.i;
  return it;
}

/* One item as Paddle's _format_item without padding: floats print "%.0f."
 * when ceil(v) == v (so inf prints "inf."), "%.<precision>f" otherwise
 * (so nan prints "nan"); integers in full; bools True/False. */
static int format_item(const pd_tensor *t, item it, char *out, size_t cap) {
  if (t->dtype == PD_BOOL) return snprintf(out, cap, "%s", it.i ? "True" : "False");
  if (!pd_dtype_is_floating(t->dtype)) return snprintf(out, cap, "%lld", it.i);
  double v = it.v;
  if (isnan(v)) return snprintf(out, cap, "nan");
  if (isinf(v)) return snprintf(out, cap, v > 0 ? "inf." : "-inf.");
  if (ceil(v) == v) return snprintf(out, cap, "%.0f.", v);
  return snprintf(out, cap, "%.*f", g_precision, v);
}

typedef struct ctx {
  const pd_tensor *t;
  bool summary, sign;
  int width;
  sbuf *b;
} ctx;

/* Elements that set the column width and the sign column: as Paddle's
 * _get_max_width(_to_summary(x)), the edges of every dim longer than
 * 2 * EDGE, whether or not the tensor is printed in summary. */
static bool visible(const ctx *c, int d, int64_t i) {
  return c->t->shape[d] <= 2 * EDGE || i < EDGE || i >= c->t->shape[d] - EDGE;
}

static item value_at(const pd_tensor *t, const int64_t *idx) {
  int64_t off = t->offset;
  for (int d = 0; d < t->ndim; d++) off += idx[d] * t->strides[d];
  return load_item(t, (const char *)t->storage->data + (size_t)off * pd_dtype_size(t->dtype));
}

static void measure(ctx *c, int d, int64_t *idx) {
  if (d == c->t->ndim) {
    char s[64];
    item it = value_at(c->t, idx);
    int w = format_item(c->t, it, s, sizeof s);
    if (w > c->width) c->width = w;
    if (it.v < 0) c->sign = true;
    return;
  }
  int64_t n = c->t->shape[d];
  for (int64_t i = 0; i < n; i++) {
    if (!visible(c, d, i)) i = n - EDGE; /* skip the middle without walking it */
    idx[d] = i;
    measure(c, d + 1, idx);
  }
}

/* Whether the printout elides the middle of long dims: past THRESHOLD
 * elements, as Paddle's, and for an empty tensor whose leading dims would
 * print more than THRESHOLD "[]" (a shape [2^53, 0] holds no element but
 * would print 2^53 of them). */
static bool summarize(const pd_tensor *t) {
  if (t->numel > THRESHOLD) return true;
  if (t->numel > 0) return false;
  int64_t groups = 1;
  for (int d = 0; d < t->ndim && t->shape[d] > 0; d++) {
    if (t->shape[d] > THRESHOLD / groups) return true;
    groups *= t->shape[d];
  }
  return false;
}

static void emit_item(ctx *c, const int64_t *idx) {
  char s[64];
  item it = value_at(c->t, idx);
  int w = format_item(c->t, it, s, sizeof s);
  if (c->width > w && c->sign && !(it.v < 0)) {
    put(c->b, " ", 1);
    puts_(c->b, s);
    spaces(c->b, c->width - 1 - w);
  } else {
    puts_(c->b, s);
    if (c->width > w) spaces(c->b, c->width - w);
  }
}

static void emit(ctx *c, int d, int64_t *idx, int indent) {
  const pd_tensor *t = c->t;
  int64_t n = t->shape[d];
  bool cut = c->summary && n > 2 * EDGE;
  put(c->b, "[", 1);
  if (d == t->ndim - 1) {
    int per_line = (LINEWIDTH - indent) / (c->width + 2);
    if (per_line < 1) per_line = 1;
    int k = 0;
    for (int64_t i = 0; i < n; i++) {
      if (cut && i == EDGE) {
        if (k) puts_(c->b, k % per_line ? ", " : ",\n");
        if (k && k % per_line == 0) spaces(c->b, indent + 1);
        puts_(c->b, "...");
        k++;
        i = n - EDGE - 1;
        continue;
      }
      if (k) {
        if (k % per_line == 0) {
          puts_(c->b, ",\n");
          spaces(c->b, indent + 1);
        } else {
          puts_(c->b, ", ");
        }
      }
      idx[d] = i;
      emit_item(c, idx);
      k++;
    }
  } else {
    bool first = true;
    for (int64_t i = 0; i < n; i++) {
      if (!first) {
        put(c->b, ",", 1);
        for (int r = 0; r < t->ndim - d - 1; r++) put(c->b, "\n", 1);
        spaces(c->b, indent + 1);
      }
      first = false;
      if (cut && i == EDGE) {
        puts_(c->b, "...");
        i = n - EDGE - 1;
        continue;
      }
      idx[d] = i;
      emit(c, d + 1, idx, indent + 1);
    }
  }
  put(c->b, "]", 1);
}

char *pd_tensor_to_string(const pd_tensor *t) {
  if (!t) {
    pd_set_error(PD_ERR_INVALID, "to_string: tensor is NULL");
    return NULL;
  }
  sbuf b = {0};
  char head[512], shp[200];
  if (t->is_meta) { /* a static Variable prints as Paddle's: it has no values */
    snprintf(head, sizeof head, "var %s : LOD_TENSOR.shape(", t->name ? t->name : "(unnamed)");
    puts_(&b, head);
    for (int d = 0; d < t->ndim; d++) {
      snprintf(shp, sizeof shp, d ? ", %lld" : "%lld", (long long)t->shape[d]);
      puts_(&b, shp);
    }
    snprintf(head, sizeof head, ").dtype(%s).stop_gradient(%s)", pd_dtype_name(t->dtype),
             t->stop_gradient ? "True" : "False");
    puts_(&b, head);
    if (!b.oom) return b.p;
    free(b.p);
    pd_set_error(PD_ERR_MEMORY, "to_string: out of memory");
    return NULL;
  }
  snprintf(head, sizeof head, "Tensor(shape=%s, dtype=%s, place=Place(cpu), stop_gradient=%s,\n",
           pd_shape_str(t->ndim, t->shape, shp, sizeof shp), pd_dtype_name(t->dtype),
           t->stop_gradient ? "True" : "False");
  puts_(&b, head);
  spaces(&b, 7);
  ctx c = {.t = t, .summary = summarize(t), .b = &b};
  int64_t idx[PD_MAX_DIMS] = {0};
  if (t->ndim == 0) {
    c.width = 0;
    emit_item(&c, idx);
  } else { /* empty dims print "[]" at their level, as Paddle's */
    measure(&c, 0, idx);
    emit(&c, 0, idx, 7);
  }
  put(&b, ")", 1);
  if (b.oom) {
    free(b.p);
    pd_set_error(PD_ERR_MEMORY, "to_string: out of memory");
    return NULL;
  }
  return b.p;
}

pd_status pd_tensor_print(const pd_tensor *t, FILE *f) {
  char *s = pd_tensor_to_string(t);
  if (!s) return pd_last_status();
  fprintf(f ? f : stdout, "%s\n", s);
  free(s);
  return PD_OK;
}
