/* Fuzz target for the .npy and .npz readers: any input must give a tensor
 * or a clean error, never a crash, a leak or a read out of bounds. A .npy
 * that loads must also encode and load back to the same dtype, shape and
 * bytes.
 *
 * ctest runs it through tests/fuzz/standalone_driver.c (fuzz_npy_standalone,
 * any compiler) on seed files that fuzz_make_seeds writes: each seed, each
 * truncation of it and a fixed set of mutations; see standalone_driver.c
 * for its flags and how to replay a failure. With Clang there is also a
 * libFuzzer build, best run from a sanitizer build:
 *   CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DPADDLEC_SANITIZE=ON
 *   cmake --build build-fuzz -j2 --target fuzz_npy fuzz_make_seeds
 *   ./build-fuzz/tests/fuzz/fuzz_make_seeds /tmp/seeds
 *   ./build-fuzz/tests/fuzz/fuzz_npy /tmp/seeds/npy -max_len=4096 -max_total_time=600
 * A crash leaves crash-<sha1> in the current directory; replay it with
 * ./build-fuzz/tests/fuzz/fuzz_npy crash-<sha1>. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/io_internal.h"
#include "fuzz_util.h"
#include "paddlec.h"

static void round_trip(const pd_tensor *t) {
  unsigned char *enc;
  size_t n;
  fuzz_check(pd_io_npy_encode(t, &enc, &n, "fuzz") == PD_OK, "a loaded array does not encode");
  pd_tensor *back = pd_io_load_npy_buffer(enc, n, "round trip");
  free(enc);
  fuzz_check(back != NULL, "an encoded array does not load");
  int nd = pd_tensor_ndim(t);
  fuzz_check(pd_tensor_dtype(back) == pd_tensor_dtype(t) && pd_tensor_ndim(back) == nd,
             "the round trip changed the dtype or rank");
  fuzz_check(memcmp(pd_tensor_shape(back), pd_tensor_shape(t), sizeof(int64_t) * (size_t)nd) == 0,
             "the round trip changed the shape");
  size_t bytes = (size_t)pd_tensor_numel(t) * pd_dtype_size(pd_tensor_dtype(t));
  fuzz_check(bytes == 0 || memcmp(pd_tensor_data(back), pd_tensor_data(t), bytes) == 0,
             "the round trip changed the data");
  pd_tensor_release(back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  pd_tensor *t = pd_io_load_npy_buffer(data, size, "fuzz.npy");
  if (t) {
    /* touch every element: the tensor must own all its bytes */
    double s = 0;
    for (int64_t i = 0; i < pd_tensor_numel(t) && i < 4096; i++) s += pd_tensor_item_at(t, i);
    (void)s;
    round_trip(t);
    pd_tensor_release(t);
  } else {
    fuzz_check(pd_last_error()[0] != 0, "a failed .npy load left no message");
  }
  pd_clear_error();
  pd_io_npz *z = pd_io_load_npz_buffer(data, size, "fuzz.npz");
  if (z) {
    for (int i = 0; i < pd_io_npz_count(z); i++) {
      const char *name = pd_io_npz_name(z, i);
      fuzz_check(name != NULL, "an npz member has no name");
      pd_tensor *m = pd_io_npz_get(z, name);
      fuzz_check(m != NULL, "an npz member cannot be fetched by its name");
      round_trip(m);
      pd_tensor_release(m);
    }
  } else {
    fuzz_check(pd_last_error()[0] != 0, "a failed .npz load left no message");
  }
  pd_io_npz_release(z);
  pd_clear_error();
  return 0;
}
