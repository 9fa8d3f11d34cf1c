/* paddle.io.Dataset / IterableDataset: datasets made of callbacks, and how
 * the library calls user-level callbacks. */
#include <stdlib.h>
#include <string.h>

#include "io_internal.h"

void pd_io_error_copy(char *buf, size_t cap) {
  const char *m = pd_last_error();
  size_t n = strlen(m);
  if (n >= cap) n = cap - 1;
  memcpy(buf, m, n);
  buf[n] = '\0';
}

void pd_io_user_begin(pd_io_user_call *c, pd_tensor **out, int max_out) {
  c->saved_depth = pd_g_internal_depth;
  pd_g_internal_depth = 0;
  pd_clear_error(); /* a failing callback's message is then its own */
  pd_scope_begin();
  for (int i = 0; i < max_out; i++) out[i] = NULL;
}

int pd_io_user_end(pd_io_user_call *c, int n, pd_tensor **out, int max_out, const char *what) {
  if (n > max_out) n = pd_set_error(PD_ERR_INVALID, "%s returned %d fields for room of %d", what, n, max_out);
  for (int k = 0; k < n && n >= 0; k++)
    if (!out[k])
      n = pd_last_status() != PD_OK ? pd_last_status()
                                    : pd_set_error(PD_ERR_INVALID, "%s left field %d NULL", what, k);
  if (n < 0 && pd_last_status() == PD_OK)
    n = pd_set_error(n, "%s failed (status %d) with no message", what, n);
  for (int k = 0; k < n; k++) pd_tensor_retain(out[k]);
  pd_scope_end();
  pd_g_internal_depth = c->saved_depth;
  if (n < 0)
    for (int k = 0; k < max_out; k++) out[k] = NULL;
  return n;
}

pd_io_dataset *pd_io_dataset_new(const pd_io_dataset_fns *fns, void *user) {
  if (!fns) {
    pd_set_error(PD_ERR_INVALID, "Dataset: no callbacks given");
    return NULL;
  }
  if (fns->get_item && !fns->len) {
    pd_set_error(PD_ERR_INVALID, "Dataset: a map-style dataset (get_item) needs len");
    return NULL;
  }
  if (!fns->get_item && !fns->next) {
    pd_set_error(PD_ERR_INVALID, "Dataset: needs get_item and len (map-style) or next (iterable)");
    return NULL;
  }
  pd_io_dataset *ds = calloc(1, sizeof *ds);
  if (!ds) {
    pd_set_error(PD_ERR_MEMORY, "Dataset: out of memory");
    return NULL;
  }
  atomic_init(&ds->refcount, 1);
  ds->fns = *fns;
  ds->user = user;
  return ds;
}

pd_io_dataset *pd_io_dataset_retain(pd_io_dataset *ds) {
  if (ds) atomic_fetch_add(&ds->refcount, 1);
  return ds;
}

void pd_io_dataset_release(pd_io_dataset *ds) {
  if (!ds || atomic_fetch_sub(&ds->refcount, 1) != 1) return;
  if (ds->fns.destroy) ds->fns.destroy(ds->user);
  free(ds);
}

bool pd_io_dataset_is_iterable(const pd_io_dataset *ds) { return ds && !ds->fns.get_item; }

int64_t pd_io_dataset_len(pd_io_dataset *ds) {
  if (!ds) return pd_set_error(PD_ERR_INVALID, "Dataset: len of NULL");
  if (!ds->fns.get_item)
    return pd_set_error(PD_ERR_INVALID,
                        "IterableDataset: len() should not be called for an iterable dataset");
  int64_t n = ds->fns.len(ds->user);
  if (n < 0 && pd_last_status() == PD_OK)
    return pd_set_error(PD_ERR_INVALID, "Dataset: len returned %lld", (long long)n);
  return n;
}

int pd_io_fetch_item(pd_io_dataset *ds, int64_t index, pd_tensor **out, int max_out) {
  pd_io_user_call c;
  pd_io_user_begin(&c, out, max_out);
  int n = ds->fns.get_item(ds->user, index, out, max_out);
  n = pd_io_user_end(&c, n, out, max_out, "get_item");
  if (n < 0) {
    char msg[2048];
    pd_io_error_copy(msg, sizeof msg);
    return pd_set_error(pd_last_status(), "Dataset: sample %lld: %s", (long long)index, msg);
  }
  return n;
}

int pd_io_fetch_next(pd_io_dataset *ds, pd_tensor **out, int max_out) {
  pd_io_user_call c;
  pd_io_user_begin(&c, out, max_out);
  int n = ds->fns.next(ds->user, out, max_out);
  n = pd_io_user_end(&c, n, out, max_out, "next");
  if (n < 0) {
    char msg[2048];
    pd_io_error_copy(msg, sizeof msg);
    return pd_set_error(pd_last_status(), "IterableDataset: next: %s", msg);
  }
  return n;
}

int pd_io_run_collate(pd_io_collate_fn fn, void *user, pd_tensor *const *samples, int64_t batch, int nfields,
                      pd_tensor **out, int max_out) {
  pd_io_user_call c;
  pd_io_user_begin(&c, out, max_out);
  int n = fn(samples, batch, nfields, out, max_out, user);
  return pd_io_user_end(&c, n, out, max_out, "collate_fn");
}

static int check_out(const char *what, pd_tensor **out, int max_out) {
  if (!out || max_out <= 0)
    return pd_set_error(PD_ERR_INVALID, "%s: no room for the fields (max %d)", what, max_out);
  return 0;
}

int pd_io_dataset_get_item(pd_io_dataset *ds, int64_t index, pd_tensor **out, int max_out) {
  if (!ds) return pd_set_error(PD_ERR_INVALID, "Dataset: get_item on NULL");
  if (check_out("Dataset", out, max_out) < 0) return pd_last_status();
  if (!ds->fns.get_item)
    return pd_set_error(PD_ERR_INVALID,
                        "IterableDataset: get_item should not be called for an iterable dataset");
  int64_t len = pd_io_dataset_len(ds);
  if (len < 0) return (int)len;
  if (index < 0 || index >= len)
    return pd_set_error(PD_ERR_INDEX, "Dataset: index %lld out of range [0, %lld)", (long long)index,
                        (long long)len);
  int n = pd_io_fetch_item(ds, index, out, max_out);
  for (int k = 0; k < n; k++) pd_scope_track(out[k]);
  return n;
}

int pd_io_dataset_next(pd_io_dataset *ds, pd_tensor **out, int max_out) {
  if (!ds) return pd_set_error(PD_ERR_INVALID, "IterableDataset: next on NULL");
  if (check_out("IterableDataset", out, max_out) < 0) return pd_last_status();
  if (!ds->fns.next) return pd_set_error(PD_ERR_INVALID, "Dataset: next needs an iterable dataset");
  int n = pd_io_fetch_next(ds, out, max_out);
  for (int k = 0; k < n; k++) pd_scope_track(out[k]);
  return n;
}

pd_status pd_io_dataset_reset(pd_io_dataset *ds) {
  if (!ds) return pd_set_error(PD_ERR_INVALID, "IterableDataset: reset on NULL");
  if (!ds->fns.reset) return PD_OK;
  pd_status st = ds->fns.reset(ds->user);
  if (st < 0 && pd_last_status() == PD_OK)
    return pd_set_error(st, "IterableDataset: reset failed (status %d)", st);
  return st < 0 ? st : PD_OK;
}
