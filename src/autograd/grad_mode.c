/* no_grad, detach and tensor hooks. */
#include <stdlib.h>

#include "node.h"

static _Thread_local int g_no_grad_depth;
static _Thread_local bool g_saved_mode[64];

bool pd_set_grad_enabled(bool enabled) { return pd_grad_mode_set(enabled); }
bool pd_is_grad_enabled(void) { return pd_grad_mode_enabled(); }

void pd_no_grad_begin(void) {
  bool prev = pd_grad_mode_set(false);
  if (g_no_grad_depth < 64) g_saved_mode[g_no_grad_depth] = prev;
  g_no_grad_depth++;
}

void pd_no_grad_end(void) {
  if (g_no_grad_depth == 0) {
    pd_set_error(PD_ERR_STATE, "no_grad_end: no no_grad block is open");
    return;
  }
  g_no_grad_depth--;
  pd_grad_mode_set(g_no_grad_depth < 64 ? g_saved_mode[g_no_grad_depth] : false);
}

pd_tensor *pd_detach(pd_tensor *t) {
  if (!t) return NULL;
  return pd_tensor_new_view(t, t->ndim, t->shape, t->strides, t->offset);
}

static int push_hook(pd_hook **list, pd_tensor_hook_fn fn, pd_post_accumulate_hook_fn post, void *user) {
  pd_hook *h = calloc(1, sizeof *h);
  if (!h) return pd_set_error(PD_ERR_MEMORY, "register_hook: out of memory");
  h->fn = fn;
  h->post_fn = post;
  h->user = user;
  h->id = pd_next_hook_id();
  pd_hook **p = list; /* append: hooks run in registration order */
  while (*p) p = &(*p)->next;
  *p = h;
  return h->id;
}

int pd_tensor_register_hook(pd_tensor *t, pd_tensor_hook_fn fn, void *user) {
  if (!t || !fn) return pd_set_error(PD_ERR_INVALID, "register_hook: %s is NULL", t ? "hook" : "tensor");
  if (t->stop_gradient)
    return pd_set_error(PD_ERR_STATE,
                        "register_hook: cannot register a hook on a tensor with "
                        "stop_gradient=True");
  if (t->grad_fn) return push_hook(&t->grad_fn->out_hooks[t->out_index], fn, NULL, user);
  return push_hook(&t->hooks, fn, NULL, user);
}

int pd_tensor_register_post_accumulate_hook(pd_tensor *t, pd_post_accumulate_hook_fn fn, void *user) {
  if (!t || !fn)
    return pd_set_error(PD_ERR_INVALID, "register_post_accumulate_hook: %s is NULL", t ? "hook" : "tensor");
  if (t->grad_fn || t->stop_gradient)
    return pd_set_error(PD_ERR_STATE,
                        "register_post_accumulate_hook: only a leaf tensor with "
                        "stop_gradient=False accumulates a grad");
  return push_hook(&t->post_hooks, NULL, fn, user);
}

static bool remove_from(pd_hook **p, int id) {
  for (; *p; p = &(*p)->next) {
    if ((*p)->id == id) {
      pd_hook *h = *p;
      *p = h->next;
      free(h);
      return true;
    }
  }
  return false;
}

pd_status pd_tensor_remove_hook(pd_tensor *t, int id) {
  if (!t) return pd_set_error(PD_ERR_INVALID, "remove_hook: tensor is NULL");
  if (remove_from(&t->hooks, id) || remove_from(&t->post_hooks, id)) return PD_OK;
  if (t->grad_fn && remove_from(&t->grad_fn->out_hooks[t->out_index], id)) return PD_OK;
  return pd_set_error(PD_ERR_INVALID, "remove_hook: no hook with id %d on this tensor", id);
}
