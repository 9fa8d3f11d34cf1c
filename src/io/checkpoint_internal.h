/* Internals of the checkpoint code shared by src/io and the tests. */
#ifndef PADDLEC_CHECKPOINT_INTERNAL_H
#define PADDLEC_CHECKPOINT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "../core/strbuf.h"
#include "paddlec/checkpoint.h"

/* Largest safetensors header accepted (the reference implementation's limit). */
#define PD_SAFETENSORS_MAX_HEADER 100000000ull

/* Failure injection for crash-safety tests. After `after_bytes` bytes of a
 * checkpoint have been written, the writer either fails as if the disk had
 * (PD_ST_INJECT_FAIL: the error path runs, the temporary file is removed) or
 * kills its own process with SIGKILL (PD_ST_INJECT_KILL: use in a forked
 * child). PD_ST_INJECT_NONE turns injection off. Process-wide. */
typedef enum { PD_ST_INJECT_NONE = 0, PD_ST_INJECT_FAIL, PD_ST_INJECT_KILL } pd_st_inject_mode;
void pd_safetensors_inject(pd_st_inject_mode mode, int64_t after_bytes);

/* Temporary files of atomic saves (checkpoint_temp.c). pd_ckpt_open_temp
 * creates "<path>.tmp.<pid>.<n>" exclusively (a name already taken, say by
 * a crashed process whose pid came back, is skipped), its name into tmp;
 * the descriptor, or -1 with errno set. pd_ckpt_remove_dead_temps removes
 * the files of exactly that pattern for path whose pid names no live
 * process (kill(pid, 0) fails with ESRCH), and returns how many. */
int pd_ckpt_open_temp(const char *path, char *tmp, size_t cap);
int pd_ckpt_remove_dead_temps(const char *path);

/* True when s[0..n) is well-formed UTF-8 (no overlongs, surrogates or values
 * past U+10FFFF); *bad gets the offset of the first bad byte otherwise. */
int pd_utf8_valid(const unsigned char *s, size_t n, size_t *bad);

#endif
