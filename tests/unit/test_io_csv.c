/* CSV files of numbers: delimiters, header rows, blank lines, CRLF, dtypes,
 * and errors naming the line and column of a bad cell. */
#include <locale.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "temp_dir.h"
#include "test_util.h"

static const char *write_text(const char *name, const char *text, size_t n) {
  static char p[160];
  snprintf(p, sizeof p, "%s/%s", temp_dir(), name);
  FILE *f = fopen(p, "wb");
  assert_non_null(f);
  fwrite(text, 1, n, f);
  fclose(f);
  return p;
}
#define WRITE(name, text) write_text((name), (text), sizeof(text) - 1)

static void expect_csv_error(const char *path, const pd_io_csv_opts *o, const char *frag1,
                             const char *frag2) {
  pd_tensor *t = pd_io_load_csv(path, o);
  if (t) fail_msg("loaded; expected an error with '%s'", frag1);
  const char *m = pd_last_error();
  if (!strstr(m, "load_csv")) fail_msg("error '%s' lacks load_csv", m);
  if (frag1 && !strstr(m, frag1)) fail_msg("error '%s' lacks '%s'", m, frag1);
  if (frag2 && !strstr(m, frag2)) fail_msg("error '%s' lacks '%s'", m, frag2);
}

static void test_csv_values(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *t = pd_io_load_csv(WRITE("a.csv", "1,2,3\n4.5, -6 ,7e2\n"), NULL);
  assert_int_equal(pd_tensor_dtype(t), PD_FLOAT32);
  expect_shape(t, 2, SHAPE(2, 3));
  EXPECT_VALUES(t, 0, 1, 2, 3, 4.5, -6, 700);
  /* header row, ';', CRLF, blank lines, no final newline, float64 */
  t = pd_io_load_csv(WRITE("b.csv", "x;y\r\n\r\n0.1;0.2\r\n  \r\n0.3;1e-300"),
                     &(pd_io_csv_opts){.delimiter = ';', .header = true, .dtype = PD_FLOAT64});
  assert_int_equal(pd_tensor_dtype(t), PD_FLOAT64);
  expect_shape(t, 2, SHAPE(2, 2));
  EXPECT_VALUES(t, 0, 0.1, 0.2, 0.3, 1e-300);
  /* tabs as the delimiter, one column, nan and inf */
  t = pd_io_load_csv(WRITE("c.csv", "1\t2\n3\t4\n"), &(pd_io_csv_opts){.delimiter = '\t'});
  EXPECT_VALUES(t, 0, 1, 2, 3, 4);
  t = pd_io_load_csv(WRITE("d.csv", "5\n-inf\nnan\n"), NULL);
  expect_shape(t, 2, SHAPE(3, 1));
  assert_true(pd_tensor_item_at(t, 1) < -1e308);
  assert_true(pd_tensor_item_at(t, 2) != pd_tensor_item_at(t, 2));
  /* an empty file, or a header only */
  expect_shape(pd_io_load_csv(WRITE("e.csv", ""), NULL), 2, SHAPE(0, 0));
  expect_shape(pd_io_load_csv(WRITE("f.csv", "a,b\n"), &(pd_io_csv_opts){.header = true}), 2, SHAPE(0, 0));
  /* the program's locale does not change the decimal point */
  if (setlocale(LC_NUMERIC, "de_DE.UTF-8")) {
    EXPECT_VALUES(pd_io_load_csv(WRITE("g.csv", "1.5\n"), NULL), 0, 1.5);
    setlocale(LC_NUMERIC, "C");
  }
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_csv_errors(void **state) {
  (void)state;
  expect_csv_error(WRITE("e1.csv", "1,2\n3,abc\n"), NULL, "line 2, column 2", "'abc' is not a number");
  expect_csv_error(WRITE("e2.csv", "h1,h2\n1,2\n\n3,,4\n"), &(pd_io_csv_opts){.header = true},
                   "line 4, column 2", "empty cell");
  expect_csv_error(WRITE("e3.csv", "1,2\n3,4,5\n"), NULL, "line 2 has 3 columns", "earlier rows have 2");
  expect_csv_error(WRITE("e4.csv", "1,2\n3,4x\n"), NULL, "line 2, column 2", "'4x'");
  expect_csv_error(WRITE("e5.csv", "1 2,3\n"), NULL, "line 1, column 1", "'1 2'");
  expect_csv_error(WRITE("e6.csv", "1,2\n3,4,\n"), NULL, "line 2, column 3", "empty cell");
  expect_csv_error(write_text("e7.csv", "1,2\n3\0,4\n", 9), NULL, "line 2", "NUL");
  expect_csv_error(WRITE("e8.csv", "1;2\n"), NULL, "line 1, column 1", "'1;2'");
  expect_csv_error(WRITE("e9.csv", "1\n"), &(pd_io_csv_opts){.dtype = PD_INT32}, "int32", NULL);
  expect_csv_error(WRITE("e10.csv", "1\n"), &(pd_io_csv_opts){.delimiter = '.'}, "delimiter '.'", NULL);
  char missing[160];
  snprintf(missing, sizeof missing, "%s/none.csv", temp_dir());
  expect_csv_error(missing, NULL, "cannot open", "none.csv");
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_csv_values),
      cmocka_unit_test(test_csv_errors),
  };
  return cmocka_run_group_tests(tests, temp_dir_setup, temp_dir_teardown);
}
