/* Attributes by name, generated from the registry: every row names its
 * attributes in a well-formed attr_names, and every op sample's pd_attrs
 * survives the round trips pd_attrs -> named list -> pd_attrs and
 * pd_attrs -> JSON text -> pd_attrs unchanged (so a slot a sample sets but
 * the row does not name fails here). */
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "op_samples.h"
#include "ops/op_attrs.h"
#include "test_util.h"

static void expect_last_error(const char *frag1, const char *frag2) {
  const char *e = pd_last_error();
  if (!strstr(e, frag1) || (frag2 && !strstr(e, frag2)))
    fail_msg("error '%s' lacks '%s' or '%s'", e, frag1, frag2 ? frag2 : "");
  pd_clear_error();
}

static bool same_double(double x, double y) { return x == y || (isnan(x) && isnan(y)); }

/* Whether a and b hold the same attributes; prints the first difference. */
static bool attrs_equal(const char *op, const pd_attrs *a, const pd_attrs *b) {
  for (int k = 0; k < PD_ATTR_INTS; k++)
    if (a->i[k] != b->i[k])
      return fprintf(stderr, "  %s: i%d %lld vs %lld\n", op, k, (long long)a->i[k], (long long)b->i[k]),
             false;
  for (int k = 0; k < PD_ATTR_FLOATS; k++)
    if (!same_double(a->f[k], b->f[k]))
      return fprintf(stderr, "  %s: f%d %g vs %g\n", op, k, a->f[k], b->f[k]), false;
  for (int k = 0; k < PD_ATTR_LISTS; k++) {
    if (a->nv[k] != b->nv[k])
      return fprintf(stderr, "  %s: v%d has %d vs %d entries\n", op, k, a->nv[k], b->nv[k]), false;
    for (int j = 0; j < a->nv[k]; j++)
      if (a->v[k][j] != b->v[k][j]) return fprintf(stderr, "  %s: v%d[%d] differs\n", op, k, j), false;
  }
  if (a->dtype != b->dtype)
    return fprintf(stderr, "  %s: dtype %d vs %d\n", op, (int)a->dtype, (int)b->dtype), false;
  if (strncmp(a->s, b->s, sizeof a->s) != 0)
    return fprintf(stderr, "  %s: s '%s' vs '%s'\n", op, a->s, b->s), false;
  return true;
}

static void test_every_row_names_its_attributes(void **state) {
  (void)state;
  int bad = 0;
  for (int id = 0; id < PD_NUM_OPS; id++) {
    pd_attr specs[PD_MAX_ATTRS];
    if (pd_op_attr_specs(pd_op_table[id], specs, PD_MAX_ATTRS) < 0) {
      fprintf(stderr, "  %s\n", pd_last_error());
      pd_clear_error();
      bad++;
    }
  }
  assert_int_equal(bad, 0);
}

static void test_malformed_names_are_refused(void **state) {
  (void)state;
  static const struct {
    const char *names, *frag;
  } cases[] = {
      {"i0", "has no ':'"},
      {"x0:axis", "unknown slot"},
      {"i9:axis", "past the last"},
      {"f4:alpha", "past the last"},
      {"i0:Axis", "invalid name"},
      {"i0:", "invalid name"},
      {"i0:axis,i1:axis", "repeats a name"},
      {"i0:axis,i0:dim", "repeats a slot"},
      {"i0:axis,", "trailing comma"},
      {"i0:axis, i1:keepdim", "unknown slot"},
      {"s:a_very_long_attribute_name_of_forty_chars", "invalid name"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    pd_op_def def = {.name = "fake", .attr_names = cases[k].names};
    pd_attr specs[PD_MAX_ATTRS];
    assert_true(pd_op_attr_specs(&def, specs, PD_MAX_ATTRS) < 0);
    expect_last_error("fake: attr_names item", cases[k].frag);
  }
  pd_op_def none = {.name = "fake"};
  pd_attr specs[PD_MAX_ATTRS];
  assert_true(pd_op_attr_specs(&none, specs, PD_MAX_ATTRS) < 0);
  expect_last_error("fake: the registry row names no attributes", NULL);
  pd_op_def empty = {.name = "fake", .attr_names = ""};
  assert_int_equal(pd_op_attr_specs(&empty, specs, PD_MAX_ATTRS), 0);
}

/* pd_attrs -> named list -> pd_attrs, and through JSON text. */
static int round_trip(const pd_op_def *def, const pd_attrs *a) {
  pd_attr list[PD_MAX_ATTRS];
  int n = pd_op_attrs_list(def, a, list, PD_MAX_ATTRS);
  if (n < 0) return fprintf(stderr, "  %s\n", pd_last_error()), 1;
  pd_attrs back;
  memset(&back, 0, sizeof back);
  for (int k = 0; k < n; k++)
    if (pd_op_attr_set(def, &back, &list[k]) != PD_OK) return fprintf(stderr, "  %s\n", pd_last_error()), 1;
  if (!attrs_equal(def->name, a, &back))
    return fprintf(stderr, "  %s: the named list loses a slot\n", def->name), 1;
  cJSON *j = pd_op_attrs_to_json(def, a);
  char *text = j ? cJSON_PrintUnformatted(j) : NULL;
  cJSON_Delete(j);
  cJSON *parsed = text ? cJSON_Parse(text) : NULL;
  pd_status st = parsed ? pd_op_attrs_from_json(def, parsed, &back) : PD_ERR_INVALID;
  int bad = st != PD_OK || !attrs_equal(def->name, a, &back);
  if (bad)
    fprintf(stderr, "  %s: JSON %s does not read back: %s\n", def->name, text ? text : "(none)",
            pd_last_error());
  cJSON_Delete(parsed);
  cJSON_free(text);
  return bad;
}

static void test_every_sample_round_trips(void **state) {
  (void)state;
  int bad = 0, runs = 0;
  for (size_t t = 0; pd_sample_tables[t]; t++)
    for (const pd_op_sample *s = pd_sample_tables[t]; s->op; s++) {
      int id = pd_op_find(s->op);
      assert_true(id >= 0);
      pd_tensor *in[PD_MAX_OUTPUTS] = {0};
      pd_attrs a;
      memset(&a, 0, sizeof a);
      int n_in = s->make(in, &a);
      assert_true(n_in >= 0);
      bad += round_trip(pd_op_table[id], &a);
      runs++;
      for (int i = 0; i < n_in; i++) pd_tensor_release(in[i]);
    }
  printf("op_attrs: %d samples round-tripped, %d failed\n", runs, bad);
  assert_int_equal(bad, 0);
  pd_clear_error();
  expect_no_live_tensors();
}

static void test_named_access_and_json(void **state) {
  (void)state;
  const pd_op_def *slice = pd_op_table[PD_OP_strided_slice];
  pd_attrs a = {0};
  sample_set_list(&a, 0, 2, SHAPE(0, 1));
  sample_set_list(&a, 1, 2, SHAPE(-3, 0));
  sample_set_list(&a, 2, 2, SHAPE(INT64_MAX, INT64_MIN));
  sample_set_list(&a, 3, 2, SHAPE(1, -1));
  pd_attr v;
  assert_int_equal(pd_op_attr_get(slice, &a, "ends", &v), PD_OK);
  assert_int_equal(v.kind, PD_AK_INTS);
  assert_int_equal(v.slot, 2);
  assert_int_equal(v.n, 2);
  assert_true(v.v[0] == INT64_MAX && v.v[1] == INT64_MIN);
  cJSON *j = pd_op_attrs_to_json(slice, &a);
  char *text = cJSON_PrintUnformatted(j);
  /* integers beyond 2^53 are exact decimal strings */
  assert_string_equal(text,
                      "{\"axes\":[0,1],\"starts\":[-3,0],\"ends\":[\"9223372036854775807\","
                      "\"-9223372036854775808\"],\"strides\":[1,-1]}");
  cJSON_free(text);
  cJSON_Delete(j);

  /* set by name, with the kind checked */
  const pd_op_def *scale = pd_op_table[PD_OP_scale];
  pd_attrs s = {0};
  pd_attr f = {.name = "bias", .kind = PD_AK_FLOAT, .f = -INFINITY};
  assert_int_equal(pd_op_attr_set(scale, &s, &f), PD_OK);
  assert_true(isinf(s.f[1]) && s.f[1] < 0);
  f.kind = PD_AK_INT;
  assert_int_equal(pd_op_attr_set(scale, &s, &f), PD_ERR_INVALID);
  expect_last_error("scale: attribute 'bias' is a float, got an int", NULL);
  strcpy(f.name, "gamma");
  assert_int_equal(pd_op_attr_set(scale, &s, &f), PD_ERR_INVALID);
  expect_last_error("scale: no attribute named 'gamma'", NULL);
  j = pd_op_attrs_to_json(scale, &s);
  text = cJSON_PrintUnformatted(j);
  assert_non_null(strstr(text, "\"bias\":\"-inf\""));
  cJSON_free(text);
  cJSON_Delete(j);

  /* the dtype by name; bad JSON names op and attribute */
  const pd_op_def *cast = pd_op_table[PD_OP_cast];
  pd_attrs c;
  cJSON *obj = cJSON_Parse("{\"dtype\":\"bfloat16\"}");
  assert_int_equal(pd_op_attrs_from_json(cast, obj, &c), PD_OK);
  assert_int_equal(c.dtype, PD_BFLOAT16);
  cJSON_Delete(obj);
  static const struct {
    const char *op, *json, *frag;
  } bad[] = {
      {"cast", "{\"dtype\":\"float7\"}", "cast: attribute 'dtype' must be a dtype name"},
      {"cast", "{\"dtype\":3}", "cast: attribute 'dtype' must be a dtype name"},
      {"cast", "{\"axis\":1}", "cast: no attribute named 'axis'"},
      {"scale", "{\"scale\":\"big\"}", "scale: attribute 'scale' must be a number"},
      {"scale", "[1, 2]", "scale: attributes must be a JSON object"},
      {"sum", "{\"axis\":[1.5]}", "sum: attribute 'axis' = 1.5 is not an integer"},
      {"sum", "{\"axis\":[1,2,3,4,5,6,7,8,9,10]}", "sum: attribute 'axis' has 10 entries"},
      {"sum", "{\"keepdim\":\"12x\"}", "sum: attribute 'keepdim' must be an integer"},
      {"sum", "{\"keepdim\":1e300}", "not an integer within"},
  };
  for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
    obj = cJSON_Parse(bad[k].json);
    assert_non_null(obj);
    if (pd_op_attrs_from_json(pd_op_table[pd_op_find(bad[k].op)], obj, &c) >= 0)
      fail_msg("%s accepted", bad[k].json);
    expect_last_error(bad[k].frag, NULL);
    cJSON_Delete(obj);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_row_names_its_attributes),
      cmocka_unit_test(test_malformed_names_are_refused),
      cmocka_unit_test(test_every_sample_round_trips),
      cmocka_unit_test(test_named_access_and_json),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
