#define _GNU_SOURCE /* memfd_create, program_invocation_short_name */
#include "fuzz_util.h"

#include <errno.h> /* program_invocation_short_name */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "paddlec.h"

void fuzz_check(int ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "%s: %s (%s)\n", program_invocation_short_name, what, pd_last_error());
    abort();
  }
}

const char *fuzz_input_file(const uint8_t *data, size_t size) {
  static int fd = -1;
  static char path[64];
  if (fd < 0) {
    fd = memfd_create("fuzz_input", MFD_CLOEXEC);
    fuzz_check(fd >= 0, "memfd_create failed");
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  }
  fuzz_check(ftruncate(fd, 0) == 0, "ftruncate failed");
  for (size_t off = 0; off < size;) {
    ssize_t k = pwrite(fd, data + off, size - off, (off_t)off);
    fuzz_check(k > 0, "pwrite failed");
    off += (size_t)k;
  }
  return path;
}
