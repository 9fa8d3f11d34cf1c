/* Fuzz target for the CSV reader: any input must give a 2-D tensor or a
 * clean error naming the file, never a crash, a leak or a read out of
 * bounds. Each input is read three ways: the defaults, a header row with
 * float64, and ';' as the delimiter. pd_io_load_csv reads a path, so the
 * input goes into an in-memory file (memfd) read through /proc/self/fd.
 *
 * ctest runs it through tests/fuzz/standalone_driver.c (fuzz_csv_standalone)
 * on the files fuzz_make_seeds writes into seeds/csv; with Clang there is
 * also a libFuzzer build (see fuzz_npy.c for how to run one). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "paddlec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fuzz_input_file(data, size);
  const pd_io_csv_opts opts[3] = {{0}, {.header = true, .dtype = PD_FLOAT64}, {.delimiter = ';'}};
  for (int k = 0; k < 3; k++) {
    pd_tensor *t = pd_io_load_csv(path, &opts[k]);
    if (t) {
      fuzz_check(pd_tensor_ndim(t) == 2, "a loaded table is not 2-D");
      fuzz_check(pd_tensor_dtype(t) == (k == 1 ? PD_FLOAT64 : PD_FLOAT32),
                 "a loaded table has the wrong dtype");
      int64_t n = pd_tensor_numel(t);
      fuzz_check(n == pd_tensor_shape(t)[0] * pd_tensor_shape(t)[1],
                 "a loaded table's shape and size disagree");
      double s = 0;
      for (int64_t i = 0; i < n && i < 4096; i++) s += pd_tensor_item_at(t, i);
      (void)s;
      pd_tensor_release(t);
    } else {
      fuzz_check(strstr(pd_last_error(), "load_csv") != NULL,
                 "a failed load left no message naming load_csv");
    }
    pd_clear_error();
  }
  return 0;
}
