/* paddle.static.device_guard, cpu_places and cuda_places for a build that
 * runs on the CPU only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "static_internal.h"

#define MAX_DEVICE_GUARDS 32

static _Thread_local char t_devices[MAX_DEVICE_GUARDS][16];
static _Thread_local int t_device_depth;

const char *pd_static_current_device(void) { return t_device_depth > 0 ? t_devices[t_device_depth - 1] : ""; }

/* Paddle's device names other than cpu: valid there, absent here. */
static bool is_accelerator(const char *kind, size_t n) {
  static const char *const names[] = {"gpu", "xpu", "npu", "mlu", "ipu"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    if (strlen(names[i]) == n && strncmp(kind, names[i], n) == 0) return true;
  return false;
}

pd_status pd_static_check_device(const char *who, const char *device) {
  const char *d = device ? device : "";
  const char *colon = strchr(d, ':');
  size_t kind_len = colon ? (size_t)(colon - d) : strlen(d);
  if (kind_len == 3 && strncmp(d, "cpu", 3) == 0 && colon)
    return pd_set_error(PD_ERR_INVALID, "%s: '%s': should not set device id for cpu", who, d);
  bool cpu = kind_len == 3 && strncmp(d, "cpu", 3) == 0;
  if (*d && !cpu) {
    if (is_accelerator(d, kind_len))
      return pd_set_error(PD_ERR_UNIMPLEMENTED,
                          "%s: device '%s' is not available: paddle.c runs on the CPU only "
                          "(use 'cpu' or none)",
                          who, d);
    return pd_set_error(PD_ERR_INVALID,
                        "%s: the device should be 'cpu', 'gpu', 'xpu', 'npu' or 'mlu' (with an "
                        "optional ':id'), or empty for no device, but received '%s'",
                        who, d);
  }
  return PD_OK;
}

pd_status pd_static_device_guard_begin(const char *device) {
  if (t_device_depth >= MAX_DEVICE_GUARDS)
    return pd_set_error(PD_ERR_STATE, "device_guard: nested more than %d deep", MAX_DEVICE_GUARDS);
  pd_status st = pd_static_check_device("device_guard", device);
  if (st != PD_OK) return st;
  snprintf(t_devices[t_device_depth++], sizeof t_devices[0], "%s", device ? device : "");
  return PD_OK;
}

pd_status pd_static_device_guard_end(void) {
  if (t_device_depth <= 0)
    return pd_set_error(PD_ERR_STATE, "device_guard: _end without a matching _begin on this thread");
  t_device_depth--;
  return PD_OK;
}

int pd_static_cpu_places(int device_count, pd_place *out, int cap) {
  if (device_count < 0) {
    pd_set_error(PD_ERR_INVALID, "cpu_places: device_count must be > 0 (0 for the default), got %d",
                 device_count);
    return -1;
  }
  if (cap < 0 || (cap > 0 && !out)) {
    pd_set_error(PD_ERR_INVALID, "cpu_places: the output array is NULL or its capacity %d is negative", cap);
    return -1;
  }
  int n = device_count;
  if (n == 0) { /* Paddle's default: the CPU_NUM environment variable, else 1 */
    const char *env = getenv("CPU_NUM");
    n = 1;
    if (env && *env) {
      char *end;
      long v = strtol(env, &end, 10);
      if (*end || v <= 0 || v > 1 << 20) {
        pd_set_error(PD_ERR_INVALID, "cpu_places: CPU_NUM='%s' is not a positive count of devices", env);
        return -1;
      }
      n = (int)v;
    }
  }
  for (int i = 0; i < n && i < cap; i++) out[i] = PD_CPU;
  return n;
}

int pd_static_cuda_places(const int *device_ids, int n_ids, pd_place *out, int cap) {
  (void)device_ids;
  (void)n_ids;
  (void)out;
  (void)cap;
  pd_set_error(PD_ERR_UNIMPLEMENTED,
               "cuda_places: not compiled with CUDA (paddle.c runs on the CPU only; use cpu_places)");
  return -1;
}
