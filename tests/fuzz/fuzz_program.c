/* Fuzz target for the Program file reader (pd_static_deserialize_program):
 * any input must give a Program or a clean error, never a crash, a leak or
 * a read out of bounds. A Program that loads must print, and write a file
 * that loads back and writes the same bytes.
 *
 * ctest runs it through tests/fuzz/standalone_driver.c (fuzz_program_standalone)
 * on the Program files fuzz_make_seeds writes; with Clang there is also the
 * libFuzzer build fuzz_program (see fuzz_npy.c for how to run it longer). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "paddlec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  pd_program *p = pd_static_deserialize_program(data, size);
  if (!p) {
    fuzz_check(pd_last_error()[0] != 0, "a failed Program load left no message");
    pd_clear_error();
    return 0;
  }
  char *text = pd_program_to_string(p);
  fuzz_check(text != NULL, "a loaded Program does not print");
  free(text);
  size_t n;
  char *file = pd_static_serialize_program(p, &n);
  fuzz_check(file != NULL, "a loaded Program does not serialize");
  pd_program *back = pd_static_deserialize_program(file, n);
  fuzz_check(back != NULL, "a serialized Program does not load back");
  size_t n2;
  char *again = pd_static_serialize_program(back, &n2);
  fuzz_check(again != NULL && n2 == n && memcmp(file, again, n) == 0,
             "a Program changed on a second round trip");
  free(again);
  free(file);
  pd_program_release(back);
  pd_program_release(p);
  pd_clear_error();
  return 0;
}
