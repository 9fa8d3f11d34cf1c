/* Paddle's unique_name.generate and static.name_scope. */
#include <pthread.h>
#include <string.h>

#include "static_internal.h"

/* key -> next number, process-wide like Paddle's generator. */
#define MAX_KEYS 512
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  char key[64];
  int next;
} g_keys[MAX_KEYS];
static int g_nkeys;

void pd_static_unique_name(const char *key, char *out, size_t cap) {
  pthread_mutex_lock(&g_lock);
  int idx = -1;
  for (int i = 0; i < g_nkeys && idx < 0; i++)
    if (strncmp(g_keys[i].key, key, sizeof g_keys[i].key - 1) == 0) idx = i;
  if (idx < 0 && g_nkeys < MAX_KEYS) {
    idx = g_nkeys++;
    snprintf(g_keys[idx].key, sizeof g_keys[idx].key, "%s", key);
  }
  /* past MAX_KEYS distinct keys, the rest share one counter: still unique */
  int n = idx >= 0 ? g_keys[idx].next++ : g_keys[MAX_KEYS - 1].next++;
  pthread_mutex_unlock(&g_lock);
  snprintf(out, cap, "%s_%d", key, n);
}

/* name_scope: a per-thread stack of prefixes, joined. */
static _Thread_local char t_prefix[256];
static _Thread_local size_t t_len[32];
static _Thread_local int t_depth;

void pd_static_name_scope_begin(const char *prefix) {
  if (t_depth < 32) t_len[t_depth] = strlen(t_prefix);
  t_depth++;
  size_t n = strlen(t_prefix);
  snprintf(t_prefix + n, sizeof t_prefix - n, "%s/", prefix && *prefix ? prefix : "name_scope");
}

void pd_static_name_scope_end(void) {
  if (t_depth <= 0) return;
  t_depth--;
  if (t_depth < 32) t_prefix[t_len[t_depth]] = 0;
}

const char *pd_static_name_scope_prefix(void) { return t_prefix; }
