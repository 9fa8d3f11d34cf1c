/* layer.state_dict() to and from safetensors files. */
#include <stdlib.h>
#include <string.h>

#include "checkpoint_internal.h"

pd_status pd_layer_save(const pd_layer *layer, const char *path) {
  if (!layer) return pd_set_error(PD_ERR_INVALID, "layer_save: layer is NULL");
  pd_named_tensors sd;
  pd_status st = pd_layer_state_dict(layer, &sd);
  if (st != PD_OK) return st;
  pd_string_map meta = {0};
  st = pd_string_map_set(&meta, "kind", "layer");
  if (st == PD_OK) st = pd_save_ex(&sd, path, &meta);
  pd_string_map_free(&meta);
  pd_named_tensors_free(&sd);
  return st;
}

static int has_name(const pd_named_tensors *l, const char *name) {
  for (int i = 0; i < l->n; i++)
    if (strcmp(l->names[i], name) == 0) return 1;
  return 0;
}

/* Appends up to a few names of `a` that `b` lacks to `sb`; returns how many there are. */
static int list_absent(pd_strbuf *sb, const char *label, const pd_named_tensors *a,
                       const pd_named_tensors *b) {
  int count = 0;
  for (int i = 0; i < a->n; i++) {
    if (has_name(b, a->names[i])) continue;
    if (count == 0) pd_sb_printf(sb, "%s%s: ", sb->len ? "; " : "", label);
    if (count < 16) pd_sb_printf(sb, "%s'%s'", count ? ", " : "", a->names[i]);
    count++;
  }
  if (count > 16) pd_sb_printf(sb, " and %d more", count - 16);
  return count;
}

pd_status pd_layer_load(pd_layer *layer, const char *path, bool strict) {
  if (!layer) return pd_set_error(PD_ERR_INVALID, "layer_load: layer is NULL");
  pd_named_tensors file;
  pd_status st = pd_load(path, &file);
  if (st != PD_OK) return st;
  if (strict) {
    pd_named_tensors own;
    st = pd_layer_state_dict(layer, &own);
    if (st == PD_OK) {
      pd_strbuf sb = {0};
      int bad = list_absent(&sb, "missing keys", &own, &file);
      bad += list_absent(&sb, "unexpected keys", &file, &own);
      if (bad)
        st = pd_set_error(PD_ERR_INVALID, "layer_load: '%s' does not match the layer (%s): %s", path,
                          pd_layer_full_name(layer), sb.s ? sb.s : "out of memory");
      free(sb.s);
      pd_named_tensors_free(&own);
    }
  }
  if (st == PD_OK) {
    st = pd_layer_set_state_dict(layer, &file, NULL, NULL);
    if (st != PD_OK) {
      char msg[1024];
      snprintf(msg, sizeof msg, "%s", pd_last_error());
      st = pd_set_error(st, "layer_load: '%s': %s", path, msg);
    }
  }
  pd_state_free(&file);
  return st;
}
