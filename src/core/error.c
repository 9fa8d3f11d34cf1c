/* Thread-local error state and PADDLEC_ABORT_ON_ERROR. */
#include <execinfo.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core_internal.h"

static _Thread_local char g_msg[2048];
static _Thread_local pd_status g_status = PD_OK;

const char *pd_last_error(void) { return g_msg; }
pd_status pd_last_status(void) { return g_status; }

void pd_clear_error(void) {
  g_msg[0] = 0;
  g_status = PD_OK;
}

static int abort_on_error(void) {
  static int cached = -1;
  if (cached < 0) {
    const char *e = getenv("PADDLEC_ABORT_ON_ERROR");
    cached = e && e[0] && strcmp(e, "0") != 0;
  }
  return cached;
}

pd_status pd_set_error(pd_status code, const char *fmt, ...) {
  /* format into a scratch buffer first: callers may pass pd_last_error() as an argument */
  char tmp[sizeof g_msg];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  memcpy(g_msg, tmp, sizeof g_msg);
  g_status = code < 0 ? code : PD_ERR_INVALID;
  if (abort_on_error()) {
    fprintf(stderr, "paddle.c error: %s\n", g_msg);
    void *frames[64];
    int n = backtrace(frames, 64);
    backtrace_symbols_fd(frames, n, 2);
    abort();
  }
  return g_status;
}

pd_status pd_opts_not_from_defaults(const char *cls, const char *defaults_fn) {
  return pd_set_error(PD_ERR_INVALID,
                      "%s: options must start from %s (a struct literal would take every field it leaves "
                      "out as 0, not Paddle's default; NULL options mean every default)",
                      cls, defaults_fn);
}

void pd_error_prefix(const char *fmt, ...) {
  char pre[512], tmp[sizeof g_msg];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(pre, sizeof pre, fmt, ap);
  va_end(ap);
  /* pre, ": ", then as much of the old message as fits */
  size_t np = strlen(pre), nm = strlen(g_msg);
  if (np + 2 >= sizeof tmp) return;
  memcpy(tmp, pre, np);
  memcpy(tmp + np, ": ", 2);
  if (nm > sizeof tmp - np - 3) nm = sizeof tmp - np - 3;
  memcpy(tmp + np + 2, g_msg, nm);
  tmp[np + 2 + nm] = 0;
  memcpy(g_msg, tmp, sizeof g_msg);
}
