/* Thread-local error state and PADDLEC_ABORT_ON_ERROR. */
#include <execinfo.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "paddlec/core.h"

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
