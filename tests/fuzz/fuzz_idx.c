/* Fuzz target for the idx (MNIST) reader, plain or gzipped: any input must
 * give a tensor of the announced shape or a clean error, never a crash, a
 * leak or a read out of bounds. pd_io_load_idx reads a path, so each input
 * goes into an in-memory file (memfd) read through /proc/self/fd.
 *
 * ctest runs it through tests/fuzz/standalone_driver.c (fuzz_idx_standalone)
 * on the files fuzz_make_seeds writes into seeds/idx; with Clang there is
 * also a libFuzzer build (see fuzz_npy.c for how to run one). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "fuzz_util.h"
#include "paddlec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  pd_tensor *t = pd_io_load_idx(fuzz_input_file(data, size));
  if (t) {
    int64_t numel = 1;
    for (int i = 0; i < pd_tensor_ndim(t); i++) numel *= pd_tensor_shape(t)[i];
    fuzz_check(pd_tensor_numel(t) == numel && pd_tensor_ndim(t) >= 1,
               "a loaded tensor's shape and size disagree");
    double s = 0;
    for (int64_t i = 0; i < numel && i < 4096; i++) s += pd_tensor_item_at(t, i);
    (void)s;
    pd_tensor_release(t);
  } else {
    fuzz_check(pd_last_error()[0] != 0, "a failed load left no message");
  }
  pd_clear_error();
  return 0;
}
