/* A scratch folder for a test file's files: pass temp_dir_setup and
 * temp_dir_teardown to cmocka_run_group_tests; temp_path(name) is
 * "<folder>/<name>". */
#ifndef PADDLEC_TEST_TEMP_DIR_H
#define PADDLEC_TEST_TEMP_DIR_H

/* Makes a new /tmp/paddlec_test_XXXXXX (0, or -1 when it cannot). */
int temp_dir_setup(void **state);
/* Removes the folder and everything below it (0, or -1 on a failure). */
int temp_dir_teardown(void **state);
/* The folder made by temp_dir_setup. */
const char *temp_dir(void);
/* "<folder>/<name>" in one of eight rotating buffers: valid until the
 * eighth call after it. */
const char *temp_path(const char *name);

#endif
