/* Scopes: tensors returned to the user between pd_scope_begin and
 * pd_scope_end are released at the end unless kept. Only tensors handed to
 * the user are tracked: library internals run at depth > 0 (see
 * pd_internal_enter) and manage their references by hand. */
#include <pthread.h>
#include <stdlib.h>

#include "core_internal.h"
#include "tensor_impl.h"

typedef struct scope {
  pd_tensor **items;
  size_t n, cap;
} scope;

static _Thread_local scope *g_scopes;
static _Thread_local int g_capscopes;
_Thread_local int pd_g_nscopes; /* open scopes on this thread */
#define g_nscopes pd_g_nscopes
_Thread_local int pd_g_internal_depth;

/* Buffers kept across outermost scopes while this small; given back at
 * thread exit. */
#define KEEP_SCOPES 8
#define KEEP_ITEMS 1024

static void free_buffers(void *unused) {
  (void)unused;
  for (int i = 0; i < g_capscopes; i++) free(g_scopes[i].items);
  free(g_scopes);
  g_scopes = NULL;
  g_capscopes = 0;
}

#ifndef PADDLEC_NO_CACHING
static pthread_key_t g_exit_key;
static pthread_once_t g_exit_once = PTHREAD_ONCE_INIT;
static _Thread_local bool g_exit_registered;
static void exit_key_init(void) { pthread_key_create(&g_exit_key, free_buffers); }

static void keep_until_exit(void) {
  if (g_exit_registered) return;
  g_exit_registered = true;
  pthread_once(&g_exit_once, exit_key_init);
  pthread_setspecific(g_exit_key, (void *)1); /* non-NULL: the destructor runs at exit */
}
#endif

static void scope_push(scope *s, pd_tensor *t) {
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 64;
    pd_tensor **items = realloc(s->items, cap * sizeof *items);
    if (!items) abort(); /* cannot record ownership: nothing sane to do */
    s->items = items;
    s->cap = cap;
  }
  s->items[s->n++] = t;
}

pd_tensor *pd_scope_track_slow(pd_tensor *t) {
  scope_push(&g_scopes[g_nscopes - 1], t);
  return t;
}

pd_tensor *(pd_scope_track)(pd_tensor *t) { return pd_scope_track(t); }

void pd_scope_begin(void) {
  if (g_nscopes == g_capscopes) {
    int cap = g_capscopes ? g_capscopes * 2 : 8;
    scope *s = realloc(g_scopes, (size_t)cap * sizeof *s);
    if (!s) abort();
    for (int i = g_capscopes; i < cap; i++) s[i] = (scope){0};
    g_scopes = s;
    g_capscopes = cap;
  }
  g_scopes[g_nscopes++].n = 0; /* nested scopes reuse their item buffers */
}

void pd_scope_end(void) {
  if (g_nscopes == 0) {
    pd_set_error(PD_ERR_STATE, "scope_end: no scope is open");
    return;
  }
  scope *s = &g_scopes[--g_nscopes];
  for (size_t i = s->n; i-- > 0;) pd_tensor_release(s->items[i]);
  s->n = 0;
  if (g_nscopes == 0) {    /* the outermost scope closed */
#ifndef PADDLEC_NO_CACHING /* (the sanitizer build gives everything back at once) */
    bool small = g_capscopes <= KEEP_SCOPES;
    for (int i = 0; i < g_capscopes && small; i++) small = g_scopes[i].cap <= KEEP_ITEMS;
    if (small) { /* a training loop opens one scope per step: keep its buffers for the next */
      keep_until_exit();
      return;
    }
#endif
    free_buffers(NULL);
  }
}

pd_tensor *pd_keep(pd_tensor *t) {
  if (!t || g_nscopes == 0) return t;
  scope *s = &g_scopes[g_nscopes - 1];
  for (size_t i = s->n; i-- > 0;) {
    if (s->items[i] == t) {
      s->items[i] = s->items[--s->n];
      if (g_nscopes > 1) scope_push(&g_scopes[g_nscopes - 2], t);
      return t;
    }
  }
  return t; /* not owned by the scope (a parameter, or already kept) */
}
