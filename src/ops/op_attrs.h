/* Attributes by name: the view of an op's pd_attrs that Program printing
 * and serialization use. A registry row's attr_names lists its attributes
 * as comma-separated items, each a slot and a name:
 *   i<k>:<name>  int64 slot a->i[k]        f<k>:<name>  double slot a->f[k]
 *   v<k>:<name>  int64 list a->v[k], a->nv[k]
 *   s:<name>     the string a->s           dtype         the dtype a->dtype
 * ("i0:axis,i1:keepdim,f0:alpha,v0:shape,s:equation,dtype"); "" names none.
 * Names are [a-z_][a-z0-9_]*, each slot and each name at most once. */
#ifndef PADDLEC_OPS_OP_ATTRS_H
#define PADDLEC_OPS_OP_ATTRS_H

#include "op_registry.h"

struct cJSON;

typedef enum pd_attr_kind {
  PD_AK_INT,    /* a->i[slot] */
  PD_AK_FLOAT,  /* a->f[slot] */
  PD_AK_INTS,   /* a->v[slot], a->nv[slot] entries */
  PD_AK_STRING, /* a->s */
  PD_AK_DTYPE,  /* a->dtype */
} pd_attr_kind;

#define PD_ATTR_NAME_MAX 32
/* At most one attribute per slot. */
#define PD_MAX_ATTRS (PD_ATTR_INTS + PD_ATTR_FLOATS + PD_ATTR_LISTS + 2)

/* One named attribute: where it lives (from attr_names) and its value
 * (the field of its kind). */
typedef struct pd_attr {
  char name[PD_ATTR_NAME_MAX];
  pd_attr_kind kind;
  int slot; /* index into i, f or v */
  int64_t i;
  double f;
  int n; /* entries of v */
  int64_t v[PD_MAX_DIMS];
  char s[sizeof(((pd_attrs *)0)->s)];
  pd_dtype dtype;
} pd_attr;

/* The attributes def->attr_names declares, in its order, values zero.
 * Returns their count, or a negative status naming the op and the item
 * when the string is missing or malformed. */
int pd_op_attr_specs(const pd_op_def *def, pd_attr *specs, int cap);
/* The named attributes of `a` for op def: (name, kind, value) in the order
 * of attr_names. Returns their count, or a negative status. */
int pd_op_attrs_list(const pd_op_def *def, const pd_attrs *a, pd_attr *out, int cap);
/* Reads the attribute `name` of `a` into *out; an error names the op and
 * the name when the op has no such attribute. */
pd_status pd_op_attr_get(const pd_op_def *def, const pd_attrs *a, const char *name, pd_attr *out);
/* Sets the attribute v->name of `a` from v's field of its kind, which must
 * be the declared one; an error names op, attribute and both kinds. */
pd_status pd_op_attr_set(const pd_op_def *def, pd_attrs *a, const pd_attr *v);

/* The attributes as a JSON object keyed by name: ints and floats as
 * numbers, except integers beyond 2^53 (as decimal strings, exact) and
 * non-finite floats ("inf", "-inf", "nan"); lists as arrays; the dtype by
 * its name. NULL with an error on failure; the caller deletes it. */
struct cJSON *pd_op_attrs_to_json(const pd_op_def *def, const pd_attrs *a);
/* Zeroes *a and sets each member of obj by name; an unknown name or a
 * value of the wrong type is an error naming the op and the attribute. */
pd_status pd_op_attrs_from_json(const pd_op_def *def, const struct cJSON *obj, pd_attrs *a);

#endif
