/* Attributes by name (see op_attrs.h): parsing a row's attr_names, reading
 * and setting a pd_attrs by name, and its JSON form. */
#include "op_attrs.h"

#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Integers a double holds exactly: beyond these, JSON gets a string. */
#define EXACT_INT ((int64_t)1 << 53)

static const char *kind_name(pd_attr_kind k) {
  static const char *const names[] = {"int", "float", "int list", "string", "dtype"};
  return (unsigned)k < sizeof names / sizeof *names ? names[k] : "?";
}

static pd_status bad_names(const pd_op_def *def, const char *item, int len, const char *why) {
  return pd_set_error(PD_ERR_INVALID, "%s: attr_names item '%.*s' %s (attr_names \"%s\")", def->name, len,
                      item, why, def->attr_names);
}

static bool valid_name(const char *p, int len) {
  if (len <= 0 || len >= PD_ATTR_NAME_MAX || !((p[0] >= 'a' && p[0] <= 'z') || p[0] == '_')) return false;
  for (int k = 1; k < len; k++)
    if (!((p[k] >= 'a' && p[k] <= 'z') || (p[k] >= '0' && p[k] <= '9') || p[k] == '_')) return false;
  return true;
}

/* One item "<slot>:<name>" or "dtype" into *s. */
static pd_status parse_item(const pd_op_def *def, const char *p, int len, pd_attr *s) {
  memset(s, 0, sizeof *s);
  if (len == 5 && memcmp(p, "dtype", 5) == 0) {
    s->kind = PD_AK_DTYPE;
    memcpy(s->name, "dtype", 6);
    return PD_OK;
  }
  const char *colon = memchr(p, ':', (size_t)len);
  if (!colon) return bad_names(def, p, len, "has no ':' (expected <slot>:<name> or dtype)");
  int head = (int)(colon - p), limit = 0;
  if (head == 1 && p[0] == 's') {
    s->kind = PD_AK_STRING;
  } else if (head == 2 && p[1] >= '0' && p[1] <= '9' && (p[0] == 'i' || p[0] == 'f' || p[0] == 'v')) {
    s->kind = p[0] == 'i' ? PD_AK_INT : p[0] == 'f' ? PD_AK_FLOAT : PD_AK_INTS;
    limit = p[0] == 'i' ? PD_ATTR_INTS : p[0] == 'f' ? PD_ATTR_FLOATS : PD_ATTR_LISTS;
    s->slot = p[1] - '0';
    if (s->slot >= limit) return bad_names(def, p, len, "names a slot past the last one");
  } else {
    return bad_names(def, p, len, "has an unknown slot (expected i<k>, f<k>, v<k> or s)");
  }
  int nlen = len - head - 1;
  if (!valid_name(colon + 1, nlen))
    return bad_names(def, p, len, "has an invalid name (expected [a-z_][a-z0-9_]*, under 32 characters)");
  memcpy(s->name, colon + 1, (size_t)nlen);
  return PD_OK;
}

int pd_op_attr_specs(const pd_op_def *def, pd_attr *specs, int cap) {
  if (!def->attr_names)
    return pd_set_error(PD_ERR_INVALID, "%s: the registry row names no attributes (attr_names is NULL)",
                        def->name);
  int n = 0;
  for (const char *p = def->attr_names; *p;) {
    const char *end = strchr(p, ',');
    int len = end ? (int)(end - p) : (int)strlen(p);
    if (n >= cap || n >= PD_MAX_ATTRS) return bad_names(def, p, len, "is one attribute too many");
    pd_status st = parse_item(def, p, len, &specs[n]);
    if (st != PD_OK) return st;
    for (int k = 0; k < n; k++) {
      if (strcmp(specs[k].name, specs[n].name) == 0) return bad_names(def, p, len, "repeats a name");
      if (specs[k].kind == specs[n].kind && specs[k].slot == specs[n].slot)
        return bad_names(def, p, len, "repeats a slot");
    }
    n++;
    if (!end) break;
    p = end + 1;
    if (!*p) return bad_names(def, p, 0, "is empty (a trailing comma)");
  }
  return n;
}

static void read_value(const pd_attrs *a, pd_attr *v) {
  switch (v->kind) {
    case PD_AK_INT:
      v->i = a->i[v->slot];
      break;
    case PD_AK_FLOAT:
      v->f = a->f[v->slot];
      break;
    case PD_AK_INTS:
      v->n = a->nv[v->slot] < 0 ? 0 : a->nv[v->slot] > PD_MAX_DIMS ? PD_MAX_DIMS : a->nv[v->slot];
      memcpy(v->v, a->v[v->slot], sizeof(int64_t) * (size_t)v->n);
      break;
    case PD_AK_STRING:
      memcpy(v->s, a->s, sizeof v->s);
      v->s[sizeof v->s - 1] = 0;
      break;
    case PD_AK_DTYPE:
      v->dtype = a->dtype;
      break;
  }
}

int pd_op_attrs_list(const pd_op_def *def, const pd_attrs *a, pd_attr *out, int cap) {
  int n = pd_op_attr_specs(def, out, cap);
  for (int k = 0; k < n; k++) read_value(a, &out[k]);
  return n;
}

/* The spec named `name` into *s. */
static pd_status find(const pd_op_def *def, const char *name, pd_attr *s) {
  pd_attr specs[PD_MAX_ATTRS];
  int n = pd_op_attr_specs(def, specs, PD_MAX_ATTRS);
  if (n < 0) return (pd_status)n;
  for (int k = 0; k < n; k++)
    if (strcmp(specs[k].name, name) == 0) {
      *s = specs[k];
      return PD_OK;
    }
  return pd_set_error(PD_ERR_INVALID, "%s: no attribute named '%s' (attr_names \"%s\")", def->name, name,
                      def->attr_names);
}

pd_status pd_op_attr_get(const pd_op_def *def, const pd_attrs *a, const char *name, pd_attr *out) {
  if (!name) return pd_set_error(PD_ERR_INVALID, "%s: attribute name is NULL", def->name);
  pd_status st = find(def, name, out);
  if (st == PD_OK) read_value(a, out);
  return st;
}

pd_status pd_op_attr_set(const pd_op_def *def, pd_attrs *a, const pd_attr *v) {
  pd_attr s;
  pd_status st = find(def, v->name, &s);
  if (st != PD_OK) return st;
  if (s.kind != v->kind)
    return pd_set_error(PD_ERR_INVALID, "%s: attribute '%s' is %s %s, got %s %s", def->name, v->name,
                        s.kind == PD_AK_INT ? "an" : "a", kind_name(s.kind),
                        v->kind == PD_AK_INT ? "an" : "a", kind_name(v->kind));
  switch (s.kind) {
    case PD_AK_INT:
      a->i[s.slot] = v->i;
      break;
    case PD_AK_FLOAT:
      a->f[s.slot] = v->f;
      break;
    case PD_AK_INTS:
      if (v->n < 0 || v->n > PD_MAX_DIMS)
        return pd_set_error(PD_ERR_INVALID, "%s: attribute '%s' has %d entries (at most %d)", def->name,
                            v->name, v->n, PD_MAX_DIMS);
      a->nv[s.slot] = v->n;
      memcpy(a->v[s.slot], v->v, sizeof(int64_t) * (size_t)v->n);
      break;
    case PD_AK_STRING:
      if (!memchr(v->s, 0, sizeof v->s))
        return pd_set_error(PD_ERR_INVALID, "%s: attribute '%s' is longer than %zu characters", def->name,
                            v->name, sizeof v->s - 1);
      memcpy(a->s, v->s, sizeof a->s);
      break;
    case PD_AK_DTYPE:
      if ((unsigned)v->dtype >= PD_NUM_DTYPES)
        return pd_set_error(PD_ERR_DTYPE, "%s: attribute '%s' is an invalid dtype %d", def->name, v->name,
                            (int)v->dtype);
      a->dtype = v->dtype;
      break;
  }
  return PD_OK;
}

/* ---- JSON -------------------------------------------------------------------- */

static cJSON *int_json(int64_t v) {
  if (v >= -EXACT_INT && v <= EXACT_INT) return cJSON_CreateNumber((double)v);
  char b[24];
  snprintf(b, sizeof b, "%lld", (long long)v);
  return cJSON_CreateString(b);
}

/* The shortest of %.15g, %.16g, %.17g that reads back exactly (cJSON's own
 * printing stops at 15 digits when they are within an epsilon). */
static cJSON *float_json(double v) {
  if (isfinite(v)) {
    char b[32];
    for (int digits = 15; digits <= 17; digits++) {
      snprintf(b, sizeof b, "%.*g", digits, v);
      if (strtod(b, NULL) == v) break;
    }
    return cJSON_CreateRaw(b);
  }
  return cJSON_CreateString(isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
}

cJSON *pd_op_attrs_to_json(const pd_op_def *def, const pd_attrs *a) {
  pd_attr v[PD_MAX_ATTRS];
  int n = pd_op_attrs_list(def, a, v, PD_MAX_ATTRS);
  if (n < 0) return NULL;
  cJSON *obj = cJSON_CreateObject();
  bool ok = obj != NULL;
  for (int k = 0; k < n && ok; k++) {
    cJSON *item = NULL;
    switch (v[k].kind) {
      case PD_AK_INT:
        item = int_json(v[k].i);
        break;
      case PD_AK_FLOAT:
        item = float_json(v[k].f);
        break;
      case PD_AK_INTS:
        item = cJSON_CreateArray();
        for (int j = 0; item && j < v[k].n; j++) {
          cJSON *e = int_json(v[k].v[j]);
          if (!e || !cJSON_AddItemToArray(item, e)) {
            cJSON_Delete(e);
            cJSON_Delete(item);
            item = NULL;
          }
        }
        break;
      case PD_AK_STRING:
        item = cJSON_CreateString(v[k].s);
        break;
      case PD_AK_DTYPE:
        item = cJSON_CreateString(pd_dtype_name(v[k].dtype));
        break;
    }
    ok = item && cJSON_AddItemToObject(obj, v[k].name, item);
    if (!ok) cJSON_Delete(item);
  }
  if (!ok) {
    cJSON_Delete(obj);
    pd_set_error(PD_ERR_MEMORY, "%s: out of memory writing the attributes", def->name);
    return NULL;
  }
  return obj;
}

static pd_status wrong_type(const pd_op_def *def, const char *name, const char *want) {
  return pd_set_error(PD_ERR_INVALID, "%s: attribute '%s' must be %s in JSON", def->name, name, want);
}

/* An integer: a number with an integral value within 2^53, or a decimal
 * string (the exact form of larger ones). */
static pd_status int_from(const pd_op_def *def, const char *name, const cJSON *j, int64_t *out) {
  if (cJSON_IsNumber(j)) {
    double d = j->valuedouble;
    if (d != floor(d) || d < -(double)EXACT_INT || d > (double)EXACT_INT)
      return pd_set_error(PD_ERR_INVALID, "%s: attribute '%s' = %.17g is not an integer within +-2^53",
                          def->name, name, d);
    *out = (int64_t)d;
    return PD_OK;
  }
  if (cJSON_IsString(j)) {
    char *end;
    errno = 0;
    long long v = strtoll(j->valuestring, &end, 10);
    if (errno == 0 && end != j->valuestring && *end == 0) {
      *out = v;
      return PD_OK;
    }
  }
  return wrong_type(def, name, "an integer (a number, or a decimal string)");
}

static pd_status float_from(const pd_op_def *def, const char *name, const cJSON *j, double *out) {
  if (cJSON_IsNumber(j)) {
    *out = j->valuedouble;
    return PD_OK;
  }
  if (cJSON_IsString(j)) {
    const char *s = j->valuestring;
    if (strcmp(s, "nan") == 0)
      *out = NAN;
    else if (strcmp(s, "inf") == 0)
      *out = INFINITY;
    else if (strcmp(s, "-inf") == 0)
      *out = -INFINITY;
    else
      return wrong_type(def, name, "a number, \"inf\", \"-inf\" or \"nan\"");
    return PD_OK;
  }
  return wrong_type(def, name, "a number, \"inf\", \"-inf\" or \"nan\"");
}

/* Member j of the object into v (whose name and kind come from the spec). */
static pd_status value_from(const pd_op_def *def, const cJSON *j, pd_attr *v) {
  switch (v->kind) {
    case PD_AK_INT:
      return int_from(def, v->name, j, &v->i);
    case PD_AK_FLOAT:
      return float_from(def, v->name, j, &v->f);
    case PD_AK_INTS: {
      if (!cJSON_IsArray(j)) return wrong_type(def, v->name, "an array of integers");
      int n = cJSON_GetArraySize(j);
      if (n > PD_MAX_DIMS)
        return pd_set_error(PD_ERR_INVALID, "%s: attribute '%s' has %d entries (at most %d)", def->name,
                            v->name, n, PD_MAX_DIMS);
      v->n = 0;
      for (const cJSON *e = j->child; e; e = e->next) {
        pd_status st = int_from(def, v->name, e, &v->v[v->n++]);
        if (st != PD_OK) return st;
      }
      return PD_OK;
    }
    case PD_AK_STRING:
      if (!cJSON_IsString(j)) return wrong_type(def, v->name, "a string");
      if (strlen(j->valuestring) >= sizeof v->s)
        return pd_set_error(PD_ERR_INVALID, "%s: attribute '%s' is longer than %zu characters", def->name,
                            v->name, sizeof v->s - 1);
      strcpy(v->s, j->valuestring);
      return PD_OK;
    case PD_AK_DTYPE: {
      int dt = cJSON_IsString(j) ? pd_dtype_from_name(j->valuestring) : -1;
      if (dt < 0) return wrong_type(def, v->name, "a dtype name (\"float32\", \"int64\", ...)");
      v->dtype = (pd_dtype)dt;
      return PD_OK;
    }
  }
  return PD_OK;
}

pd_status pd_op_attrs_from_json(const pd_op_def *def, const cJSON *obj, pd_attrs *a) {
  memset(a, 0, sizeof *a);
  if (!cJSON_IsObject(obj))
    return pd_set_error(PD_ERR_INVALID, "%s: attributes must be a JSON object", def->name);
  for (const cJSON *j = obj->child; j; j = j->next) {
    pd_attr v;
    pd_status st = find(def, j->string ? j->string : "", &v);
    if (st == PD_OK) st = value_from(def, j, &v);
    if (st == PD_OK) st = pd_op_attr_set(def, a, &v);
    if (st != PD_OK) return st;
  }
  return PD_OK;
}
