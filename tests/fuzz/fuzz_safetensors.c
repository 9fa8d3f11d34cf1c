/* Fuzz target for the safetensors loader.
 *
 * Every input is loaded from memory; the loader must either fail with a
 * message or return tensors. A file that loads must also save and load back
 * to the same names, dtypes, shapes and bytes (through a file in /dev/shm
 * when there is one, so that the save's fsyncs cost nothing).
 *
 * ctest runs it through tests/fuzz/standalone_driver.c
 * (fuzz_safetensors_standalone, any compiler) on tests/fuzz/corpus and the
 * files fuzz_make_seeds writes: each seed, each truncation of it and a
 * fixed set of mutations; see standalone_driver.c for its flags and how to
 * replay a failure. With Clang there is also a libFuzzer build, best run
 * from a sanitizer build, so that the library itself is instrumented and
 * tensors come straight from malloc:
 *
 *   CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DPADDLEC_SANITIZE=ON
 *   cmake --build build-fuzz -j2 --target fuzz_safetensors
 *   cp -r tests/fuzz/corpus /tmp/st-corpus
 *   ./build-fuzz/tests/fuzz/fuzz_safetensors -dict=tests/fuzz/safetensors.dict \
 *       -max_len=4096 -max_total_time=600 /tmp/st-corpus
 *
 * A crash leaves crash-<sha1> in the current directory; replay it with
 * ./build-fuzz/tests/fuzz/fuzz_safetensors crash-<sha1>. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_util.h"
#include "paddlec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  pd_named_tensors out;
  pd_string_map meta;
  if (pd_load_buffer(data, size, "fuzz input", &out, &meta) != PD_OK) {
    fuzz_check(out.n == 0 && meta.n == 0, "a failed load returned entries");
    fuzz_check(pd_last_error()[0] != 0, "a failed load left no message");
    pd_clear_error();
    return 0;
  }
  /* round trip through a file */
  char path[64];
  snprintf(path, sizeof path, "%s/fuzz_safetensors.%ld", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp",
           (long)getpid());
  fuzz_check(pd_save_with_metadata(&out, path, &meta) == PD_OK, "a loaded state does not save");
  pd_named_tensors back;
  pd_string_map back_meta;
  fuzz_check(pd_load_with_metadata(path, &back, &back_meta) == PD_OK, "a saved state does not load");
  /* the metadata comes back as it was, with "format" added when it had none */
  const char *fmt = pd_string_map_get(&meta, "format");
  fuzz_check(back_meta.n == meta.n + (fmt ? 0 : 1), "the round trip changed the metadata count");
  for (int i = 0; i < meta.n; i++) {
    const char *v = pd_string_map_get(&back_meta, meta.keys[i]);
    fuzz_check(v && strcmp(v, meta.values[i]) == 0, "the round trip changed a metadata value");
  }
  fuzz_check(back.n == out.n, "the round trip changed the tensor count");
  for (int i = 0; i < out.n; i++) {
    const pd_tensor *a = out.tensors[i], *b = back.tensors[i];
    fuzz_check(strcmp(out.names[i], back.names[i]) == 0, "the round trip changed a name");
    fuzz_check(pd_tensor_dtype(a) == pd_tensor_dtype(b) && pd_tensor_ndim(a) == pd_tensor_ndim(b),
               "the round trip changed a dtype or rank");
    fuzz_check(
        memcmp(pd_tensor_shape(a), pd_tensor_shape(b), sizeof(int64_t) * (size_t)pd_tensor_ndim(a)) == 0,
        "the round trip changed a shape");
    size_t n = (size_t)pd_tensor_numel(a) * pd_dtype_size(pd_tensor_dtype(a));
    fuzz_check(n == 0 || memcmp(pd_tensor_data(a), pd_tensor_data(b), n) == 0,
               "the round trip changed the data");
  }
  unlink(path);
  pd_state_free(&back);
  pd_string_map_free(&back_meta);
  pd_state_free(&out);
  pd_string_map_free(&meta);
  return 0;
}
