/* libFuzzer target for the .npy and .npz readers: any input must give a
 * tensor or a clean error, never a crash, a leak or a read out of bounds.
 *
 * Built only with Clang (tests/fuzz/CMakeLists.txt compiles npy.c and npz.c
 * into it with the fuzzer's coverage instrumentation); not run by ctest.
 * Best run from a sanitizer build:
 *   CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DPADDLEC_SANITIZE=ON
 *   cmake --build build-fuzz -j2 --target fuzz_npy
 * Run with a corpus folder of small .npy/.npz files (it grows as it runs):
 *   mkdir -p /tmp/npy-corpus && ./build-fuzz/tests/fuzz/fuzz_npy /tmp/npy-corpus -max_len=4096 \
 *       -max_total_time=600
 * A crash leaves crash-<sha1> in the current directory; replay it with
 * ./build-fuzz/tests/fuzz/fuzz_npy crash-<sha1>. */
#include <stddef.h>
#include <stdint.h>

#include "paddlec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  pd_tensor *t = pd_io_load_npy_buffer(data, size, "fuzz.npy");
  if (t) {
    /* touch every element: the tensor must own all its bytes */
    double s = 0;
    for (int64_t i = 0; i < pd_tensor_numel(t) && i < 4096; i++) s += pd_tensor_item_at(t, i);
    (void)s;
    pd_tensor_release(t);
  }
  pd_io_npz *z = pd_io_load_npz_buffer(data, size, "fuzz.npz");
  pd_io_npz_free(z);
  pd_clear_error();
  return 0;
}
