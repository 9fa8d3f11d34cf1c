/* Helpers shared by the fuzz targets. */
#ifndef PADDLEC_TESTS_FUZZ_UTIL_H
#define PADDLEC_TESTS_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* A broken invariant: prints the program, what and the library's last
 * error, then aborts (the fuzzer records the input). */
void fuzz_check(int ok, const char *what);

/* The input as a file for loaders that read a path: one in-memory file
 * (memfd), rewritten for each input; returns its /proc/self/fd path. */
const char *fuzz_input_file(const uint8_t *data, size_t size);

#endif
